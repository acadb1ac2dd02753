"""A retried activity takes its workflow off the sticky queue of the worker that ran the
previous attempt, so the workflow task its result wakes does not wait for a dead worker.

After a worker dies during an activity, the retry runs elsewhere, but the workflow (and, for a
child such as ``RefundWorkflow``, its parent) stays sticky to the dead worker: the workflow
task that the retry's completion schedules waits out ``STICKY_SCHEDULE_TO_START`` (1 s) on
that worker's queue before any worker may take it, and a child's completion then costs its
parent another second. ``ResetStickyTaskQueue`` clears that before the retry completes; the
next workflow task goes to the shared queue at once (bench/turns.py: a killed write's reply
came 2 s sooner). The price is one replay of the history on whichever worker takes that task
when the previous attempt's worker was in fact alive (a retry after a model or database
error): retries are rare, replays short.
"""

from __future__ import annotations

import asyncio
import logging

from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionRequest, ResetStickyTaskQueueRequest

log = logging.getLogger("statekeeper.activities")

RELEASE_TIMEOUT_SECONDS = 1.0
"""The two or three calls take milliseconds; a server slower than this gets the retry's result
without them (the workflow task then waits out the sticky timeout, as before)."""


async def release_sticky() -> None:
    """In a retried (attempt > 1) regular activity: clear the sticky queue of its workflow and
    of that workflow's parent, if any. Never raises: a failure is logged and costs only the
    sticky timeout. Does nothing on a first attempt, in a local activity or outside one."""
    if not activity.in_activity():
        return
    info = activity.info()
    if info.is_local or info.attempt <= 1:
        return
    try:
        await asyncio.wait_for(_release(info), RELEASE_TIMEOUT_SECONDS)
    except Exception as err:  # noqa: BLE001 - an optimisation: the retry goes on without it
        log.warning("could not clear the sticky queue after a retry (%s)", type(err).__name__)


async def _release(info: activity.Info) -> None:
    service = activity.client().workflow_service
    namespace = info.workflow_namespace
    own = WorkflowExecution(workflow_id=info.workflow_id, run_id=info.workflow_run_id)
    _, described = await asyncio.gather(
        service.reset_sticky_task_queue(ResetStickyTaskQueueRequest(namespace=namespace, execution=own)),
        service.describe_workflow_execution(DescribeWorkflowExecutionRequest(namespace=namespace, execution=own)))
    parent = described.workflow_execution_info.parent_execution
    if parent.workflow_id:
        await service.reset_sticky_task_queue(ResetStickyTaskQueueRequest(
            namespace=namespace, execution=WorkflowExecution(workflow_id=parent.workflow_id, run_id=parent.run_id)))
