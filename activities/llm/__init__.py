"""The LLM activity.

- ``wire``: the client side of the Messages API wire format of our single
  ``propose_action`` tool (request kwargs, reading the ``tool_use`` proposal).
- ``model_activity``: ``ModelActivities.propose_action``, one stateless model call
  through the anthropic SDK, with errors mapped to Temporal ``ApplicationError`` types;
  ``offline_client`` points the SDK at the offline stand-in model, ``systems.model``.

Nothing here is imported by workflow code; the workflow only sees
``workflows.domain.contracts.ModelRequest`` / ``ModelResult``.
"""
