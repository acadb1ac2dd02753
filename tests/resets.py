"""Helpers to reset a conversation's workflow the way an operator would (Web UI "Reset"),
without re-applying its messages: the test sends them again, as the user would."""

from __future__ import annotations

import asyncio
import uuid

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, ResetReapplyExcludeType
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest

NO_REAPPLY = [ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_UPDATE,
              ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL]


async def completed_tasks(env, workflow_id: str) -> list[int]:
    """Event ids of the workflow's completed workflow tasks so far (the reset points)."""
    history = await env.client.get_workflow_handle(workflow_id).fetch_history()
    return [e.event_id for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED]


async def completed_before(env, workflow_id: str, marks, what: str) -> int:
    """The event id of the last workflow task completed before the first event for which
    ``marks(event)`` is true (a reset point just before it); AssertionError naming ``what``
    when no event is marked."""
    history = await env.client.get_workflow_handle(workflow_id).fetch_history()
    completed = 0
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            completed = event.event_id
        elif marks(event):
            return completed
    raise AssertionError(f"no {what} in the history")


async def reset_to(env, workflow_id: str, event_id: int) -> None:
    """Reset to the workflow task that completed at ``event_id``; nothing is re-applied."""
    await env.client.workflow_service.reset_workflow_execution(ResetWorkflowExecutionRequest(
        namespace=env.client.namespace, workflow_execution=WorkflowExecution(workflow_id=workflow_id),
        reason="test reset", workflow_task_finish_event_id=event_id, request_id=str(uuid.uuid4()),
        reset_reapply_exclude_types=NO_REAPPLY))


async def wait_for_turn(client, conversation_id: str, turn: int) -> None:
    """Wait until the (reset) conversation's state is back at user turn ``turn``."""
    for _ in range(100):
        if (await client.state(conversation_id)).turn == turn:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the conversation did not return to turn {turn}")


async def message_points(env, workflow_id: str) -> list[int]:
    """Event ids of the completed workflow tasks that accepted each user message (update
    ids ``msg-...``) in the current run, oldest first: a reset to one of them wipes that
    message and everything after it, and keeps every earlier reply."""
    history = await env.client.get_workflow_handle(workflow_id).fetch_history()
    completed, points = 0, []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            completed = event.event_id
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            update_id = event.workflow_execution_update_accepted_event_attributes.accepted_request.meta.update_id
            if update_id.startswith("msg-") and completed:
                points.append(completed)
    return points
