"""``statekeeper worker-health``: the worker's healthcheck (docker-compose's ``worker``
service). Healthy when Temporal answers and a worker of this host (its identity
``<pid>@<hostname> statekeeper ...``, ``starter.runtime.system_of_record.worker_identity``) polls
both the workflow and the activity queue of ``settings.task_queue``. Exit status 0 healthy,
1 not (with the reason on stderr).

``statekeeper stuck``: the conversations and refunds whose workflow tasks keep failing
(``starter.client.run_status``), each with what fails, since when, and the exact commands an
operator has: fix and let it move, reset it to a point, cancel it, or terminate it. It needs
Temporal only (the configured address and namespace), not a worker. Exit status 0 when none is
stuck, 1 when some are (the list on stdout), 1 with one line on stderr when Temporal cannot be
asked."""

from __future__ import annotations

import asyncio
import json
import shlex
import socket
import time
from typing import Optional

import typer
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

from settings import Settings
from starter.cli.links import list_url
from starter.client.run_status import STUCK_CLAUSE, StuckRun, since_words
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


_JSON = typer.Option(False, "--json", help="Print the stuck runs as a JSON list instead of text.")
_LIMIT = typer.Option(100, "--limit", min=1, max=100, help="List at most this many (newest first).")


def temporal_command(verb: str, run: StuckRun, address: str, namespace: str, *extra: str) -> str:
    """``temporal workflow <verb> --address A --namespace N --workflow-id W <extra>``, quoted for a shell."""
    words = ["temporal", "workflow", verb, "--address", address, "--namespace", namespace,
             "--workflow-id", run.workflow_id, *extra]
    return " ".join(shlex.quote(word) for word in words)


def advice(run: StuckRun, address: str, namespace: str) -> list[str]:
    """What an operator can do about ``run``, one line each, the commands exact (first the one
    that keeps everything the run did)."""
    reason = f"stuck: {run.cause}"
    lines = ["fix: deploy a worker whose code can run it (after a bad deploy: roll it back); it moves again by "
             "itself and leaves this list"]
    if run.process == "conversation":
        lines.append(f"reset to its last completed step, checked: statekeeper replay-check {shlex.quote(run.process_id)}"
                     f" && statekeeper resume {shlex.quote(run.process_id)}")
    lines.append("reset to a point: " + temporal_command("reset", run, address, namespace, "--type", "LastWorkflowTask",
                                                          "--reason", reason)
                 + "  (or --event-id N, a WorkflowTaskCompleted event of `temporal workflow show`)")
    lines.append("cancel (carried out once it moves again): " + temporal_command("cancel", run, address, namespace))
    lines.append("terminate (ends it now; nothing after that point runs; a write it had started is in the system of "
                 "record's ledger): " + temporal_command("terminate", run, address, namespace, "--reason", reason))
    return lines


def render(runs: list[StuckRun], address: str, namespace: str, ui_base: str) -> str:
    """The text ``statekeeper stuck`` prints for ``runs``."""
    if not runs:
        return "no stuck conversations or refunds"
    blocks = []
    for run in runs:
        attempt = f", attempt {run.attempt}" if run.attempt else ""
        head = (f"{run.process} {run.process_id} (workflow {run.workflow_id}) is stuck{since_words(run.since)}"
                f"{attempt}: {run.cause}")
        url = f"{ui_base.rstrip('/')}/namespaces/{namespace}/workflows/{run.workflow_id}"
        blocks.append("\n".join([head, f"  Web UI: {url}", *(f"  - {line}" for line in advice(run, address, namespace))]))
    noun = "run is" if len(runs) == 1 else "runs are"
    listed = list_url(ui_base, namespace, STUCK_CLAUSE)
    return (f"{len(runs)} {noun} stuck: their workflow tasks keep failing, and nothing more is done in them until "
            f"an operator acts. Web UI list: {listed}\n\n" + "\n\n".join(blocks)
            + "\n\n(`temporal` is the Temporal CLI: .venv/bin/temporal in a checkout.)")


def stuck(json_out: bool = _JSON, limit: int = _LIMIT) -> None:
    """List the stuck conversations and refunds (workflow tasks failing again and again) and what to do about each."""
    from starter.cli.refusals import command_settings, fail
    from starter.cli.support import console
    from starter.client.errors import ConversationError
    from starter.ops.bootstrap import client_for

    settings = command_settings()

    async def main() -> Optional[list[StuckRun]]:
        client = client_for(await connect(settings), settings)
        return await client.stuck_runs(limit)

    try:
        runs = asyncio.run(main()) or []
    except (StartupRefused, ConversationError) as err:
        raise fail(str(err), 1)
    if json_out:
        print(json.dumps([run.model_dump(mode="json") for run in runs], indent=2))
    else:
        console.print(render(runs, settings.temporal_address, settings.temporal_namespace,
                             f"http://127.0.0.1:{settings.ui_port}"), highlight=False, markup=False, soft_wrap=True)
    if runs:
        raise typer.Exit(1)
