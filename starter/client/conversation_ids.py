"""Which conversation an operator's argument names: commands take a conversation id or its
workflow id ``support-<id>``, and a conversation id may itself start with ``support-`` (the
API's ids allow it). Stripping the prefix blindly made ``statekeeper state support-x``,
``replay-check``, ``resume`` and ``resolve`` act on conversation ``x``."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from starter.client.errors import unreachable
from workflows.conversation.workflow import support_workflow_id

PREFIX = "support-"


async def conversation_named(client: Client, given: str) -> str:
    """The conversation id ``given`` names: itself when a conversation has that id (or it has
    no ``support-`` prefix); else, for a workflow id ``support-<id>``, ``<id>``. Raises
    ``ConversationError`` ``unavailable`` when Temporal cannot say (anything but not found):
    a guess could reach the other conversation."""
    if not given.startswith(PREFIX):
        return given
    try:
        await client.get_workflow_handle(support_workflow_id(given)).describe()
        return given
    except RPCError as err:
        if err.status is not RPCStatusCode.NOT_FOUND:
            raise unreachable() from err
    return given.removeprefix(PREFIX)
