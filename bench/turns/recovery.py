"""Restart-to-reply after a SIGKILL, for ``bench/turns.py``.

For each kind (``model``, ``read``, ``write``) and each repetition: a faulty worker process
(``bench/turns/worker_process.py --fault``) takes the conversation to the point (a model call of
turn 2 in flight; a read in flight; a write committed but not yet reported), writes a marker
and hangs; the bench SIGKILLs it, at once starts a healthy worker process, and times from
that start to the reply. Each conversation must have exactly one effect: one ledger row for
the write (a retried write finds its key), one answered turn otherwise.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from pathlib import Path
from typing import Any, Optional

from bench.turns.load import ROOT, pending_orders, spawn_worker, stop

FAULTS = {"model": "hang-model", "read": "hang-read", "write": "pause-write"}


async def _wait_for(path: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path.name} did not appear")
        await asyncio.sleep(0.05)


def _stamps(log: Path) -> list[tuple[float, str]]:
    """``(unix seconds, stage)`` of the ``STAMP`` lines in a bench worker's log."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("STAMP "):
            _, name, at = line.split()
            out.append((float(at), f"worker: {name}"))
    return out


async def _history_marks(temporal: Any, cid: str, since: float) -> list[tuple[float, str]]:
    """``(unix seconds, event)`` of the conversation's history events at or after ``since``
    (activity and workflow-task events, with the activity's type and the timeout's kind)."""
    from temporalio.api.enums.v1 import EventType  # noqa: PLC0415

    history = await temporal.get_workflow_handle(f"support-{cid}").fetch_history()
    names, out = {}, []
    for event in history.events:
        name = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_").lower()
        detail = ""
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            names[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
            detail = names[event.event_id]
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attrs = event.activity_task_started_event_attributes
            detail = f"{names.get(attrs.scheduled_event_id, '?')} attempt {attrs.attempt}"
            if attrs.last_failure.HasField("timeout_failure_info"):
                detail += f" after {attrs.last_failure.message}"
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            detail = event.workflow_task_scheduled_event_attributes.task_queue.name[:12]
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
            detail = str(event.workflow_task_timed_out_event_attributes.timeout_type)
        at = event.event_time.ToMicroseconds() / 1e6
        if at >= since:
            out.append((at, f"event {event.event_id}: {name} {detail}".rstrip()))
    return out


async def recover_once(temporal: Any, env: dict[str, str], backend: Any, store: str, pick: tuple, kind: str,
                       tmp: Path, standby: bool = False,
                       timeline: Optional[list] = None, root: Path = ROOT) -> tuple[float, int]:
    """One kill and restart; returns (seconds from restart to reply, effects seen). ``standby``:
    the healthy worker is started (and polling) before the kill: seconds from the kill.
    ``timeline``: a list that gets ``(seconds from the kill, what)`` rows: the kill, the new
    worker's start and stages (``bench/turns/worker_process.py`` stamps), the conversation's history
    events since the kill, the reply. ``root``: the checkout whose code the workers run."""
    from starter.client.conversations import StatekeeperClient  # noqa: PLC0415
    from starter.client.core import Deadlines  # noqa: PLC0415
    from tests.workflow_harness import NO_APPROVALS  # noqa: PLC0415

    _, email, order_id = pick
    queue = f"rec-{uuid.uuid4().hex[:8]}"
    env = {**env, "STATEKEEPER_TASK_QUEUE": queue}
    marker = tmp / f"{queue}.marker"
    faulty = spawn_worker(env, tmp / f"{queue}-faulty.log", root, fault=FAULTS[kind], marker=marker)
    healthy = None
    client = StatekeeperClient(temporal, queue, approvals=NO_APPROVALS,
                               deadlines=Deadlines(rpc_seconds=60, reply_seconds=120, accept_seconds=60))
    try:
        while not await client.worker_polling():
            await asyncio.sleep(0.1)
        cid = await client.start_conversation(f"rec-{uuid.uuid4().hex[:8]}", store=store)
        await client.send_message(cid, f"Hi, my email is {email}")
        last = {"model": f"order {order_id}", "read": f"order {order_id}", "write": "yes"}[kind]
        if kind == "write":
            await client.send_message(cid, f"cancel {order_id}")
        ledger_before = len(backend.ledger_entries(store))
        reply = asyncio.create_task(client.send_message(cid, last))
        await _wait_for(marker, 60)
        if standby:
            healthy = spawn_worker(env, tmp / f"{queue}-healthy.log", root)
            await asyncio.sleep(6.0)  # started and polling (its startup is not timed)
        faulty.kill()
        faulty.wait(10)
        killed = time.time()
        start = time.perf_counter()
        if not standby:
            healthy = spawn_worker(env, tmp / f"{queue}-healthy.log", root)
        answer = await asyncio.wait_for(reply, 120)
        seconds = time.perf_counter() - start
        if timeline is not None:
            marks = [(killed, "SIGKILL"), (time.time(), "reply received by the client"),
                     *([] if standby else [(killed, "new worker spawned")]),
                     *[m for m in _stamps(tmp / f"{queue}-healthy.log") if m[0] >= killed],
                     *await _history_marks(temporal, cid, killed - 3.5)]
            timeline.extend((round(at - killed, 3), what) for at, what in sorted(marks))
        assert answer.text, "no reply"
        if kind == "write":
            effects = len(backend.ledger_entries(store)) - ledger_before
        else:
            state = await client.state(cid)
            effects = sum(1 for t in state.recent_turns if t.turn == state.turn and t.role.value == "assistant")
        return seconds, effects
    finally:
        stop([p for p in (faulty, healthy) if p is not None])


async def recovery(temporal: Any, env: dict[str, str], backend: Any, store: str, tmp: Path, repeats: int,
                   kinds: tuple[str, ...] = ("model", "read", "write"), standby: bool = False,
                   first_pick: int = 0, timelines: bool = False, root: Path = ROOT) -> dict[str, dict[str, float]]:
    """``{kind: {"p50", "p95", "n", "max", "exactly_once"}}`` over ``repeats`` kills each
    (``standby``: seconds from the kill, with another worker already running); ``timelines``:
    print each kill's timeline (``recover_once``); ``root``: the checkout whose code the workers run."""
    picks = pending_orders([store])
    out: dict[str, dict[str, float]] = {}
    used = first_pick
    for kind in kinds:
        times, once = [], 0
        for _ in range(repeats):
            timeline: Optional[list] = [] if timelines else None
            seconds, effects = await recover_once(temporal, env, backend, store, picks[used], kind, tmp, standby,
                                                  timeline, root)
            if timeline is not None:
                print(f"--- {kind} ({'standby' if standby else 'restart'}, {root.name}): {seconds:.2f} s, "
                      f"{effects} effect(s)", flush=True)
                for at, what in timeline:
                    print(f"{at:+8.3f}  {what}")
            used += 1
            times.append(seconds)
            once += effects == 1
        ordered = sorted(times)
        out[kind] = {"p50": statistics.median(ordered),
                     "p95": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
                     "max": ordered[-1], "n": len(ordered), "exactly_once": once}
    return out
