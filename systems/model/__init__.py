"""The offline stand-in for the Anthropic Messages API (the model as a system of its own).

- ``server``: a FastAPI app speaking ``POST /v1/messages`` (``offline_app``,
  ``start_in_thread``, ``serve``, ``BrainFault``), answering with a deterministic brain.
- ``scripted``: the brain for benchmark runs; follows the plan pinned as a ``script`` fact.
- ``rules``: the brain for interactive chat; keyword rules over the state view.
- ``view``: the state view's wire contract (the ``<state_json>`` block) and what the
  brains know of the process (read tools, cancel reasons, rule ids), plus view helpers.
- ``wire``: the server side of the Messages API wire format (request checks, bodies).

Nothing here imports ``workflows`` or ``activities``.
"""
