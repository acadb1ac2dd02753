"""Restart-to-reply after a SIGKILL, for ``bench/turns.py``.

For each kind (``model``, ``read``, ``write``) and each repetition: a faulty worker process
(``bench/turns_worker.py --fault``) takes the conversation to the point (a model call of
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
from typing import Any

from bench.turns_load import pending_orders, spawn_worker, stop

FAULTS = {"model": "hang-model", "read": "hang-read", "write": "pause-write"}


async def _wait_for(path: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path.name} did not appear")
        await asyncio.sleep(0.05)


async def recover_once(temporal: Any, env: dict[str, str], backend: Any, store: str, pick: tuple, kind: str,
                       tmp: Path, standby: bool = False) -> tuple[float, int]:
    """One kill and restart; returns (seconds from restart to reply, effects seen). ``standby``:
    the healthy worker is started (and polling) before the kill: seconds from the kill."""
    from starter.client import StatekeeperClient  # noqa: PLC0415
    from starter.core import Deadlines  # noqa: PLC0415
    from tests.workflow_harness import NO_APPROVALS  # noqa: PLC0415

    _, email, order_id = pick
    queue = f"rec-{uuid.uuid4().hex[:8]}"
    env = {**env, "STATEKEEPER_TASK_QUEUE": queue}
    marker = tmp / f"{queue}.marker"
    faulty = spawn_worker(env, tmp / f"{queue}-faulty.log", fault=FAULTS[kind], marker=marker)
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
            healthy = spawn_worker(env, tmp / f"{queue}-healthy.log")
            await asyncio.sleep(6.0)  # started and polling (its startup is not timed)
        faulty.kill()
        faulty.wait(10)
        start = time.perf_counter()
        if not standby:
            healthy = spawn_worker(env, tmp / f"{queue}-healthy.log")
        answer = await asyncio.wait_for(reply, 120)
        seconds = time.perf_counter() - start
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
                   first_pick: int = 0) -> dict[str, dict[str, float]]:
    """``{kind: {"p50", "p95", "n", "max", "exactly_once"}}`` over ``repeats`` kills each
    (``standby``: seconds from the kill, with another worker already running)."""
    picks = pending_orders([store])
    out: dict[str, dict[str, float]] = {}
    used = first_pick
    for kind in kinds:
        times, once = [], 0
        for _ in range(repeats):
            seconds, effects = await recover_once(temporal, env, backend, store, picks[used], kind, tmp, standby)
            used += 1
            times.append(seconds)
            once += effects == 1
        ordered = sorted(times)
        out[kind] = {"p50": statistics.median(ordered),
                     "p95": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
                     "max": ordered[-1], "n": len(ordered), "exactly_once": once}
    return out
