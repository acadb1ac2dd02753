"""The offline stand-in for the Anthropic Messages API (the model as a system of its own).

- ``server``: a FastAPI app speaking ``POST /v1/messages`` (``offline_app``,
  ``start_in_thread``, ``serve``, ``BrainFault``), answering with a deterministic brain.
- ``scripted``: the brain for benchmark runs; follows a plan registered for the conversation.
- ``rules``: the brain for interactive chat; keyword rules over the state view.
- ``view``: the state view's wire contract (the ``<state_json>`` block) and what the
  brains know of the process (read tools, cancel reasons, rule ids), plus view helpers.
- ``wire``: the server side of the Messages API wire format (request checks, bodies).
- ``plans``: ``PlanBook``, the stand-in's own table of plans keyed by conversation id.

The server learns the conversation from the request's ``metadata.user_id`` (an opaque id
the caller sends); with a plan registered under it the scripted brain answers, else the
rules brain. Nothing here imports ``workflows`` or ``activities``.
"""
