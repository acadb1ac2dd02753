"""``statekeeper worker-health``: the worker's healthcheck (docker-compose's ``worker``
service). Healthy when Temporal answers and a worker of this host (its identity
``<pid>@<hostname> statekeeper ...``, ``starter.runtime.system_of_record.worker_identity``) polls
both the workflow and the activity queue of ``settings.task_queue``. Exit status 0 healthy,
1 not (with the reason on stderr)."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Optional

import typer
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

from settings import Settings
from starter.runtime.connection import connect
from starter.runtime.preflight import LIVE_POLLER_SECONDS, StartupRefused
from starter.runtime.rpc import read_again_if_dropped


async def worker_problem(settings: Settings, host: Optional[str] = None,
                         live_within_seconds: float = LIVE_POLLER_SECONDS) -> Optional[str]:
    """Why no worker of ``host`` (default this machine's hostname) serves ``settings.task_queue``,
    or None when one polls both its queues within ``live_within_seconds``."""
    host = host or socket.gethostname()
    try:
        client = await connect(settings)
    except StartupRefused as refused:  # unreachable, or TLS settings that cannot work: its message says which
        return str(refused)
    now = time.time()
    for queue_type, kind in ((TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, "workflow"),
                             (TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY, "activity")):
        request = DescribeTaskQueueRequest(namespace=settings.temporal_namespace,
                                           task_queue=TaskQueue(name=settings.task_queue), task_queue_type=queue_type)
        described = await read_again_if_dropped(lambda: client.workflow_service.describe_task_queue(request))
        if not any(f"@{host} statekeeper" in p.identity and now - p.last_access_time.ToSeconds() <= live_within_seconds
                   for p in described.pollers):
            return f"no worker of {host} polls the {kind} queue of '{settings.task_queue}'"
    return None


def worker_health() -> None:
    """Exit 0 when a worker of this host polls the task queue (docker-compose healthcheck), else 1."""
    from starter.cli.support import console
    from starter.cli.refusals import command_settings

    problem = asyncio.run(worker_problem(command_settings()))
    if problem:
        console.print(f"unhealthy: {problem}", highlight=False)
        raise typer.Exit(1)
    console.print("healthy", highlight=False)
