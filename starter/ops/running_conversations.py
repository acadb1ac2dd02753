"""Which conversations still run, asked of Temporal: ``journal purge`` keeps their rows.

A conversation idle for longer than the retention period is still going on (its workflow
waits for the next message); purging its journal rows would leave a live conversation with
half a decision log. Each conversation is described by its workflow id (exact, unlike a
visibility listing that may not have indexed a run started a moment ago).
"""

from __future__ import annotations

from typing import Iterable

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from settings import Settings
from starter.dev.server import embedded_temporal
from starter.dev.stack import connect_with_retry
from workflows.conversation.workflow import support_workflow_id


async def running_among(client: Client, conversation_ids: Iterable[str]) -> set[str]:
    """The ids among ``conversation_ids`` whose conversation's latest run is running (an id
    Temporal does not know is not). Raises ``RPCError`` when Temporal cannot answer."""
    running = set()
    for conversation_id in conversation_ids:
        try:
            described = await client.get_workflow_handle(support_workflow_id(conversation_id)).describe()
        except RPCError as err:
            if err.status is RPCStatusCode.NOT_FOUND:
                continue
            raise
        if described.status is WorkflowExecutionStatus.RUNNING:
            running.add(conversation_id)
    return running


async def running_conversations(settings: Settings, conversation_ids: set[str]) -> set[str]:
    """``running_among`` on the configured Temporal server (the embedded one is started for
    the question when none is reachable, as ``retention purge`` does). Only descriptions are
    read, so no codec key is needed. Raises ``starter.runtime.connection.TemporalUnreachable`` /
    ``DevServerError`` when no server answers."""
    plain = settings.model_copy(update={"codec_enabled": False})
    async with embedded_temporal(plain):
        return await running_among(await connect_with_retry(plain), sorted(conversation_ids))
