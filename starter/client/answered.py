"""A message retried with its id after the conversation finished, in a run other than the
one that answered it: the reply comes from the workflow's ``answered_reply`` query.

Temporal answers a retried update id only within the run that took it; a conversation that
continued as new carries the replies of earlier runs in its input (``SupportInput.answered``).
Once its last run has completed, Temporal refuses the retry as finished, and only that query
can say the message was handled and what the user was told.
"""

from __future__ import annotations

from typing import Any, Optional

from temporalio.client import WorkflowQueryFailedError
from temporalio.service import RPCError

from starter.client.errors import ConversationError
from workflows.domain.contracts import AssistantReply
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id


async def answered_reply(client: Any, handle: Any, update_id: str) -> Optional[AssistantReply]:
    """The reply the conversation (``handle``, any state) recorded for ``update_id``; ``None``
    when it recorded none, its worker code predates the query, or it cannot be asked now."""
    try:
        return await client.read(lambda: handle.query(SupportWorkflow.answered_reply, update_id,
                                                      result_type=Optional[AssistantReply],
                                                      rpc_timeout=client.rpc_timeout))
    except (RPCError, WorkflowQueryFailedError, ConversationError):
        return None  # the refusal stands: no worse than before the query existed


async def recorded_or_refused(client: Any, conversation_id: str, update_id: str, refusal: ConversationError,
                              err: Exception) -> AssistantReply:
    """The reply recorded for ``update_id`` when ``refusal`` says the conversation finished and
    an earlier run answered that message id; otherwise ``refusal`` is raised, worded as
    ``StatekeeperClient._closed`` words it (``state_incompatible`` when the state could not load)."""
    if refusal.kind == "finished":
        handle = client._client.get_workflow_handle(support_workflow_id(conversation_id))
        recorded = await answered_reply(client, handle, update_id)
        if recorded is not None:
            return recorded
    raise await client._closed(conversation_id, refusal) from err
