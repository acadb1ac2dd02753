"""Each tenant's share of a task queue's activity dispatch, set by a worker at start
(``Settings.tenant_activities_per_second``; the tenants are the runs' fairness keys,
``starter.client.tenancy.tenant_priority``)."""

from __future__ import annotations

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import RateLimit
from temporalio.api.workflowservice.v1 import UpdateTaskQueueConfigRequest
from temporalio.client import Client


async def cap_tenant_dispatch(client: Client, task_queue: str, per_second: float) -> None:
    """Let ``task_queue`` hand out at most ``per_second`` activity tasks a second to each
    fairness key (tenant), as ``temporal task-queue config set --task-queue-type activity
    --fairness-key-rps-limit-default`` does. Fairness orders the backlog but cannot stop a
    running model call, so a tenant that fills every slot makes the next one wait for a slot to
    free; below the queue's capacity, the cap keeps slots for the others. Raises
    ``temporalio.service.RPCError`` when the server refuses it."""
    update = UpdateTaskQueueConfigRequest.RateLimitUpdate(
        rate_limit=RateLimit(requests_per_second=per_second),
        reason="statekeeper: one tenant's burst leaves activity slots for the other tenants")
    await client.workflow_service.update_task_queue_config(UpdateTaskQueueConfigRequest(
        namespace=client.namespace, identity=client.identity, task_queue=task_queue,
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY, update_fairness_key_rate_limit_default=update))
