"""A retried activity takes its workflow, and a child workflow's parent, off the sticky queue
(``activities.sticky``): the workflow task its result schedules goes to the shared task queue,
where any worker takes it at once, instead of waiting out the sticky schedule-to-start timeout
on the queue of a worker that may be dead. A first attempt leaves stickiness alone."""

from __future__ import annotations

import uuid
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType, TaskQueueKind
from temporalio.common import RetryPolicy
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from activities.heartbeat import heartbeating

RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=3)


@activity.defn
async def fails_once(name: str) -> str:
    """Fails its first attempt (as a worker's death would end it), succeeds on the retry."""
    async with heartbeating():
        if activity.info().attempt == 1:
            raise RuntimeError("first attempt fails")
    return name


@activity.defn
async def succeeds(name: str) -> str:
    """Succeeds on its first attempt."""
    async with heartbeating():
        return name


@workflow.defn(sandboxed=False)
class RetriedChild:
    """A child whose one activity is retried."""

    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_activity(fails_once, "child", start_to_close_timeout=timedelta(seconds=10),
                                               retry_policy=RETRY)


@workflow.defn(sandboxed=False)
class StickyParent:
    """An activity on its first attempt, a retried one, then the child above."""

    @workflow.run
    async def run(self) -> str:
        options = dict(start_to_close_timeout=timedelta(seconds=10), retry_policy=RETRY)
        first = await workflow.execute_activity(succeeds, "first", **options)
        retried = await workflow.execute_activity(fails_once, "retried", **options)
        child = await workflow.execute_child_workflow(RetriedChild.run, id=f"{workflow.info().workflow_id}-child")
        return "/".join((first, retried, child))


async def _kinds_after(client, workflow_id: str) -> list[tuple[str, int]]:
    """``(what completed, kind of the task queue of the workflow task it scheduled)`` in order."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    out, cause = [], None
    for event in history.events:
        if event.event_type in (EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
                                EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED):
            cause = EventType.Name(event.event_type)
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED and cause is not None:
            out.append((cause, event.workflow_task_scheduled_event_attributes.task_queue.kind))
            cause = None
    return out


async def test_a_retried_activity_clears_the_sticky_queue_of_its_workflow_and_parent(temporal_env):
    client = temporal_env.client
    queue = f"sticky-{uuid.uuid4().hex[:8]}"
    workflow_id = f"sticky-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[StickyParent, RetriedChild],
                      activities=[fails_once, succeeds], workflow_runner=UnsandboxedWorkflowRunner()):
        result = await client.execute_workflow(StickyParent.run, id=workflow_id, task_queue=queue)
    assert result == "first/retried/child"
    sticky, normal = TaskQueueKind.TASK_QUEUE_KIND_STICKY, TaskQueueKind.TASK_QUEUE_KIND_NORMAL
    completed, child_done = "EVENT_TYPE_ACTIVITY_TASK_COMPLETED", "EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED"
    # the first attempt's result stays on the (live) worker's sticky queue; the retry's and,
    # because the child's activity was retried, the child's completion go to the shared queue
    assert await _kinds_after(client, workflow_id) == [(completed, sticky), (completed, normal), (child_done, normal)]
    assert await _kinds_after(client, f"{workflow_id}-child") == [(completed, normal)]
