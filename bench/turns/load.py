"""Worker processes, CPU accounting and the concurrency runs of ``bench/turns.py``.

A run starts W worker processes (``bench/turns/worker_process.py``) on one Temporal dev server and
one system of record (PostgreSQL when reachable, else SQLite), runs C conversations at once
(each: authenticate, read an order, cancel it and confirm), and reports turns per second,
turns per CPU-second (workers + the Temporal server, from ``/proc``), p50/p95 turn latency,
activity timeouts (from the histories) and duplicate effects (from the ledger).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[2]
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` and its reaped children (0 when gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / TICKS


async def cpu_settled(pids: list[int], quiet: float = 0.05, interval: float = 0.5, limit: float = 20.0) -> None:
    """Wait until processes ``pids`` together use under ``quiet`` CPU-seconds in ``interval``
    seconds (at most ``limit`` seconds): a worker that polls may still be importing its model
    SDK (``ModelActivities.warm``) or building its journal schema, and a per-turn figure must
    not carry one code's start-up and not another's."""
    deadline = time.monotonic() + limit
    last = sum(cpu_seconds(p) for p in pids)
    while time.monotonic() < deadline:
        await asyncio.sleep(interval)
        now = sum(cpu_seconds(p) for p in pids)
        if now - last < quiet:
            return
        last = now


def server_pids() -> list[int]:
    """The Temporal dev server processes started by this process (``temporal`` children)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.find("(") + 1:text.rfind(")")]
        ppid = int(text.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and name.startswith("temporal"):
            pids.append(int(stat.parent.name))
    return pids


def spawn_worker(env: dict[str, str], log: Path, root: Path = ROOT, fault: Optional[str] = None,
                 marker: Optional[Path] = None) -> subprocess.Popen:
    """A bench worker process on ``env`` (``STATEKEEPER_*``), code from ``root``."""
    command = [sys.executable, str(ROOT / "bench" / "turns" / "worker_process.py"), "--root", str(root)]
    if fault:
        command += ["--fault", fault, "--marker", str(marker)]
    return subprocess.Popen(command, cwd=root, env={**os.environ, **env}, stdout=log.open("ab"),
                            stderr=subprocess.STDOUT)


def stop(procs: list[subprocess.Popen]) -> None:
    """SIGKILL and reap ``procs`` (the bench's own processes only)."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def pending_orders(stores: list[str]) -> list[tuple[str, str, str]]:
    """``(store, email, order_id)`` per conversation that can cancel an order: one customer per
    order with a single payment, each store a fresh copy of the τ-bench data."""
    data = ROOT / "systems" / "retail" / "data"
    users = json.loads((data / "users.json").read_text())
    orders = json.loads((data / "orders.json").read_text())
    picks: dict[str, str] = {}
    for order_id, order in orders.items():
        if order["status"] == "pending" and len(order["payment_history"]) == 1:
            picks.setdefault(order["user_id"], order_id)
    return [(store, users[u]["email"], o) for store in stores for u, o in sorted(picks.items())]


async def conversation(client: Any, store: str, email: str, order_id: str, latencies: list[float],
                       read_turns: int = 1) -> None:
    """One conversation: authenticate, read the order ``read_turns`` times, cancel it, confirm."""
    cid = await client.start_conversation(f"bench-{uuid.uuid4().hex[:10]}", store=store)
    messages = [f"Hi, my email is {email}", *[f"order {order_id}"] * read_turns, f"cancel {order_id}", "yes"]
    for text in messages:
        start = time.perf_counter()
        await client.send_message(cid, text)
        latencies.append(time.perf_counter() - start)


async def timeouts(temporal: Any, since: float) -> tuple[Counter, dict[str, int]]:
    """(activity attempts that followed a timeout, by ``<activity>:<timeout kind>``; workflow
    task timeouts by kind: ``schedule_to_start`` = a sticky queue's task moved to the shared
    queue, ``start_to_close`` = a task not completed in time) in the support workflows started
    since ``since``."""
    from temporalio.api.enums.v1 import EventType, TimeoutType  # noqa: PLC0415

    def name(kind: int) -> str:
        return TimeoutType.Name(kind).removeprefix("TIMEOUT_TYPE_").lower()

    activities, tasks = Counter(), Counter()
    query = f"WorkflowType = 'SupportWorkflow' AND StartTime > '{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(since))}'"
    async for execution in temporal.list_workflows(query):
        history = await temporal.get_workflow_handle(execution.id, run_id=execution.run_id).fetch_history()
        scheduled: dict[int, str] = {}
        for event in history.events:
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                scheduled[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
            elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
                attrs = event.activity_task_timed_out_event_attributes
                activities[f"{scheduled.get(attrs.scheduled_event_id, '?')}:"
                           f"{name(attrs.failure.timeout_failure_info.timeout_type)}"] += 1
            elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
                tasks[name(event.workflow_task_timed_out_event_attributes.timeout_type)] += 1
            elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                attrs = event.activity_task_started_event_attributes
                if attrs.last_failure.HasField("timeout_failure_info"):
                    activities[f"{scheduled.get(attrs.scheduled_event_id, '?')}:"
                               f"{name(attrs.last_failure.timeout_failure_info.timeout_type)}"] += 1
    return activities, dict(tasks)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for the dev server's metrics endpoint)."""
    import socket  # noqa: PLC0415

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_requests(metrics_url: Optional[str]) -> Counter:
    """The dev server's request counters (Prometheus text at ``metrics_url``): frontend RPCs
    (``rpc:<operation>``), persistence operations (``db:<operation>``) and activities started
    eagerly (``eager:RespondWorkflowTaskCompleted``: handed to the worker in a workflow task's
    completion reply), those counted by namespace without the server's own system workflows
    (``temporal_system``); empty without a URL."""
    if not metrics_url:
        return Counter()
    import re  # noqa: PLC0415
    import urllib.request  # noqa: PLC0415

    counts: Counter = Counter()
    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()  # noqa: S310 - our own server
    for kind, metric in (("rpc", "service_requests"), ("db", "persistence_requests"),
                         ("eager", "activity_eager_execution")):
        for labels, value in re.findall(rf"^{metric}{{(.*?)}} (\S+)$", text, re.M):
            operation = re.search(r'operation="([^"]+)"', labels)
            if 'namespace="temporal_system"' in labels:
                continue  # the server's own system workflows
            if operation and ('service_name="frontend"' in labels or kind != "rpc"):
                counts[f"{kind}:{operation.group(1)}"] += float(value)
    return counts


async def settled_requests(metrics_url: Optional[str], interval_seconds: float = 1.0,
                           limit_seconds: float = 15.0) -> Counter:
    """``server_requests`` once two readings ``interval_seconds`` apart agree (long polls aside):
    the server publishes its counters periodically, so a reading right after a run missed part
    of it (0.55 updates per turn where every turn is one)."""
    last = server_requests(metrics_url)
    deadline = time.monotonic() + limit_seconds
    while metrics_url and time.monotonic() < deadline:
        await asyncio.sleep(interval_seconds)
        now = server_requests(metrics_url)
        if all(now[k] == last[k] for k in set(now) | set(last) if not k.startswith("rpc:Poll")):
            return now
        last = now
    return last


async def concurrency_run(temporal: Any, env: dict[str, str], backend: Any, stores: list[str], tmp: Path,
                          conversations: int, workers: int, root: Path = ROOT, read_turns: int = 1,
                          metrics_url: Optional[str] = None) -> dict[str, Any]:
    """One row of the concurrency table (see the module docstring); each conversation asks
    about its order ``read_turns`` times (a turn with one read each) between authenticating and
    cancelling."""
    from starter.client.conversations import StatekeeperClient  # noqa: PLC0415
    from starter.client.core import Deadlines  # noqa: PLC0415
    from tests.workflow_harness import NO_APPROVALS  # noqa: PLC0415

    queue = f"bench-{uuid.uuid4().hex[:8]}"
    env = {**env, "STATEKEEPER_TASK_QUEUE": queue}
    procs = [spawn_worker(env, tmp / f"worker-{queue}-{i}.log", root) for i in range(workers)]
    client = StatekeeperClient(temporal, queue, approvals=NO_APPROVALS,
                               deadlines=Deadlines(rpc_seconds=60, reply_seconds=600, accept_seconds=60),
                               local_model_calls=env.get("STATEKEEPER_MODEL_CALLS") == "local")
    try:
        while not await client.worker_polling():
            dead = [p for p in procs if p.poll() is not None]
            if dead:  # a worker that exits before polling would leave this loop waiting for ever
                raise RuntimeError(f"a bench worker exited with {dead[0].returncode} before polling: see {tmp}")
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)  # every process polling
        await cpu_settled([p.pid for p in procs])
        picks = pending_orders(stores)[:conversations]
        ledger_before = {s: len(backend.ledger_entries(s)) for s in stores}
        servers = server_pids()
        requests_before = await settled_requests(metrics_url)
        worker_before = sum(cpu_seconds(p.pid) for p in procs)
        server_before = sum(cpu_seconds(p) for p in servers)
        latencies: list[float] = []
        since = time.time() - 1
        start = time.perf_counter()
        results = await asyncio.gather(*(conversation(client, *pick, latencies, read_turns) for pick in picks),
                                       return_exceptions=True)
        wall = time.perf_counter() - start
        worker_cpu = sum(cpu_seconds(p.pid) for p in procs) - worker_before
        server_cpu = sum(cpu_seconds(p) for p in servers) - server_before
        cpu = worker_cpu + server_cpu
        requests = await settled_requests(metrics_url) - requests_before
    finally:
        stop(procs)
    failed = [r for r in results if isinstance(r, BaseException)]
    writes = sum(len(backend.ledger_entries(s)) for s in stores) - sum(ledger_before.values())
    turns = len(latencies)
    activity_timeouts, task_timeouts = await timeouts(temporal, since)
    ordered = sorted(latencies) or [0.0]
    return {"conversations": len(picks), "workers": workers, "turns": turns, "failed": len(failed),
            "turns_per_second": turns / wall, "turns_per_cpu_second": turns / cpu if cpu else 0.0,
            "worker_cpu_seconds": worker_cpu, "server_cpu_seconds": server_cpu,
            "p50_turn_seconds": statistics.median(ordered),
            "p95_turn_seconds": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
            "activity_timeouts": sum(activity_timeouts.values()),
            "activity_timeouts_by_kind": dict(activity_timeouts), "workflow_task_timeouts": task_timeouts,
            "writes": writes, "duplicates": sum(backend.duplicate_writes(s) for s in stores),
            "turns_per_conversation": read_turns + 3,
            "server_requests_per_turn": {k: round(v / max(turns, 1), 2) for k, v in sorted(requests.items())},
            "code": "current" if root == ROOT else root.name}  # the caller names the variant
