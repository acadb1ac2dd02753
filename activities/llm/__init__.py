"""The LLM activity and its offline stand-in model.

- ``wire``: the Messages API wire format of our single ``propose_action`` tool.
- ``model_activity``: ``ModelActivities.propose_action``, one stateless model call
  through the anthropic SDK, with errors mapped to Temporal ``ApplicationError`` types.
- ``offline_server``: a FastAPI app speaking ``POST /v1/messages``, answering with a
  deterministic brain (``scripted`` for benchmark runs, ``rules`` for chat).

Nothing here is imported by workflow code; the workflow only sees
``workflows.contracts.ModelRequest`` / ``ModelResult``.
"""
