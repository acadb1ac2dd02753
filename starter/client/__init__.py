"""The Python client for backend services: conversations, standalone refunds, approvals,
resolutions and listings over Temporal, with refusals worded for people (``ConversationError``).

``StatekeeperClient`` (``starter.client.conversations``) is the entry point; ``starter``
re-exports it.
"""
