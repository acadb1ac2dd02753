"""Chaos suite: τ-bench tasks run concurrently on PostgreSQL while worker
processes are SIGKILLed, the external services fail in every way they can, and the Temporal
server is restarted; then every effect is counted where it landed.

One run makes its own PostgreSQL databases (``bench/chaos/stack.py``: the retail system of
record with the journal and the offline model's plans, and one each for payments, email and
ticketing, served in this process by ``systems.fleet.Fleet``), its own Temporal
dev server (history in a SQLite file, so a restart keeps the state) and ``--workers`` worker
processes (``python worker.py``). While ``--n`` tasks (a ``--seed``ed sample of ``--tasks``)
run ``--concurrency`` at a time through ``starter.ops.taubench`` with a retrying front end
(``bench/chaos/user.py``: one message id per message, the same id again while the outcome
is unknown):

- a random worker is SIGKILLed and replaced at least every 5 s (2-4.5 s apart);
- each effect request to payments, email and ticketing gets a fault with probability
  ``--fault-rate``, the kinds dealt in turn from a shuffled deck (``bench/chaos/faults.py``):
  fail before commit, commit then drop the response, answer after the caller's timeout,
  5xx, slow lock;
- the Temporal server is SIGKILLed and started again on its database file ``--restarts``
  times, spread over the run (at least once).

A task ends ``matched`` (its data hash is τ-bench's), ``escalated`` (with the stated
reason), ``unmatched`` or ``lost`` (started, neither finished nor escalated). Duplicates are
counted in the four databases after the run. ``--json OUT`` writes ``{tasks, matched,
escalated, duplicates, lost, worker_kills, server_restarts, faults: {kind: count},
p95_message_seconds}`` and the details (``unmatched``, reasons grouped, each task's ending).

Run: ``.venv/bin/python bench/chaos.py --tasks ../shared/taubench-retail/tasks_train.json
--n 200 --json /tmp/chaos.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Optional

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("STATEKEEPER_CODEC_KEYS", "chaos-1:Y2hhb3MtY29kZWMta2V5LTAxMjM0NTY3ODlhYmNkZWY=")

from bench.chaos.faults import duplicates, install  # noqa: E402
from bench.chaos.stack import Databases, TemporalServer, WorkerPool, run_id, worker_env  # noqa: E402
from bench.chaos.user import Ending, FrontEnd, ending, p95, reason_group  # noqa: E402
from bench.chaos.view import Board, show  # noqa: E402

KILL_GAP_SECONDS = (2.0, 4.5)
"""Seconds between two worker kills, uniform in this range: with the kill itself and a busy event loop,
at least one kill every 5 s (the report gives the largest gap)."""


def pick_tasks(path: Path, n: int, seed: int) -> list[Any]:
    """``n`` tasks of the file at ``path``, a sample drawn with ``seed``, in file order."""
    from starter.ops.taubench import load_tasks  # noqa: PLC0415

    tasks = load_tasks(path)
    chosen = random.Random(seed).sample(range(len(tasks)), min(n, len(tasks)))
    return [tasks[i] for i in sorted(chosen)]


class Chaos:
    """The background chaos of one run: worker kills, server restarts at the ``marks``
    (numbers of tasks finished), and tending of workers that exited on their own."""

    def __init__(self, pool: WorkerPool, server: TemporalServer, rng: random.Random, marks: list[int]) -> None:
        self.pool, self.server, self.rng, self.marks = pool, server, rng, sorted(marks)
        self.finished = 0
        self.stopping = asyncio.Event()
        self.restarting = False

    async def kills(self) -> None:
        while not self.stopping.is_set():
            try:
                await asyncio.wait_for(self.stopping.wait(), self.rng.uniform(*KILL_GAP_SECONDS))
            except asyncio.TimeoutError:
                self.pool.kill_one(self.rng)  # milliseconds: a SIGKILLed process is reaped at once

    async def restarts(self) -> None:
        while not self.stopping.is_set():
            if self.marks and self.finished >= self.marks[0]:
                self.marks.pop(0)
                self.restarting = True
                try:
                    await self.server.restart()
                finally:
                    self.restarting = False
            self.pool.tend()
            await asyncio.sleep(0.5)


async def run(args: argparse.Namespace, on_update: Optional[Callable[[dict], None]] = None) -> dict[str, Any]:
    """One chaos run (see the module docstring); returns the ``--json`` report."""
    from settings import Settings  # noqa: PLC0415
    from starter.ops.bootstrap import client_for  # noqa: PLC0415
    from starter.runtime.connection import connect  # noqa: PLC0415
    from starter.client.core import Deadlines  # noqa: PLC0415
    from starter.ops.taubench import TauBenchRunner  # noqa: PLC0415
    from systems.retail.backend import RetailBackend, make_engine  # noqa: PLC0415
    from systems.fleet import SERVICES, Fleet  # noqa: PLC0415

    tasks = pick_tasks(Path(args.tasks), args.n, args.seed)
    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="chaos-"))
    rid = run_id()
    dbs = Databases(rid)
    urls = await asyncio.to_thread(dbs.create)
    server = TemporalServer(tmp)
    fleet = Fleet({name: urls[name] for name in SERVICES})
    pool: Optional[WorkerPool] = None
    backend = None
    started = time.monotonic()
    try:
        await server.start()
        services = await asyncio.to_thread(fleet.start)
        faults = install(fleet.apps, args.fault_rate, args.seed)
        backend = RetailBackend(make_engine(urls["sor"]))
        await asyncio.to_thread(backend.create_schema)
        queue = f"chaos-{rid}"
        pool = WorkerPool(worker_env(server.address, urls, services, tmp, queue), args.workers, tmp)
        await asyncio.to_thread(pool.start)
        settings = Settings(temporal_address=server.address, task_queue=queue, database_url=urls["sor"],
                            data_dir=tmp, codec_keys=os.environ["STATEKEEPER_CODEC_KEYS"], anthropic_api_key=None)
        client = client_for(await connect(settings), settings)
        client.deadlines = Deadlines(rpc_seconds=20, accept_seconds=20, reply_seconds=300)
        front = FrontEnd(client, patience_seconds=args.patience or args.task_timeout)
        while not await client.worker_polling():
            await asyncio.sleep(0.3)
        runner = TauBenchRunner(front, backend, run_id=rid, keep_stores=True)
        marks = [max(1, round(len(tasks) * (i + 1) / (args.restarts + 1))) for i in range(args.restarts)]
        chaos = Chaos(pool, server, rng, marks)
        background = [asyncio.create_task(chaos.kills()), asyncio.create_task(chaos.restarts())]
        gate = asyncio.Semaphore(args.concurrency)
        endings: list[Ending] = []

        def update() -> None:
            if on_update is not None:
                on_update({"done": len(endings), "kinds": Counter(e.kind for e in endings), "kills": pool.kills,
                           "restarts": server.restarts, "faults": sum(faults.values())})

        async def one(task: Any) -> None:
            async with gate:
                cid = f"tb-{rid}-{task.task_index}"
                try:
                    result = await asyncio.wait_for(runner.run_task(task), args.task_timeout)
                except asyncio.TimeoutError:
                    result = _timed_out(task, args.task_timeout)
                try:
                    state = await front.state(cid)
                except Exception:  # noqa: BLE001 - reported as unreadable (lost)
                    state = None
                endings.append(ending(task.task_index, result, state))
                chaos.finished += 1
                update()
                if args.json and len(endings) % 10 == 0 and len(endings) < len(tasks):  # figures so far
                    dup_now = await asyncio.to_thread(duplicates, urls)
                    partial = report(tasks, endings, dup_now, pool, server, dict(faults), front,
                                     time.monotonic() - started, args)
                    Path(args.json).write_text(json.dumps({**partial, "partial": True}, indent=2))

        update()
        try:
            await asyncio.gather(*(one(t) for t in tasks))
            while chaos.marks:  # a restart not yet reached (few tasks): do it now, then check again
                chaos.finished = len(tasks)
                await asyncio.sleep(0.5)
        finally:
            chaos.stopping.set()
            await asyncio.gather(*background, return_exceptions=True)
        await asyncio.to_thread(pool.stop)
        await asyncio.sleep(args.settle)  # let any abandoned attempt commit, were one to
        dup = await asyncio.to_thread(duplicates, urls)
        return report(tasks, endings, dup, pool, server, dict(faults), front, time.monotonic() - started, args)
    finally:
        if pool is not None:
            pool.stop()
        await asyncio.to_thread(fleet.stop)
        if backend is not None:
            backend.engine.dispose()
        server.kill()
        if not args.keep:
            await asyncio.to_thread(dbs.drop)
            shutil.rmtree(tmp, ignore_errors=True)  # the server's file and the workers' logs


def _timed_out(task: Any, seconds: float) -> Any:
    from starter.ops.taubench import TaskResult  # noqa: PLC0415

    return TaskResult(task_index=task.task_index, passed=False, hash_match=False, outputs_match=False,
                      reason=f"no end within {seconds:g} s", writes=0, duplicate_writes=0, seconds=seconds)


def report(tasks: list, endings: list[Ending], dup: dict[str, int], pool: WorkerPool, server: TemporalServer,
           faults: dict[str, int], front: FrontEnd, seconds: float, args: argparse.Namespace) -> dict[str, Any]:
    """The ``--json`` report (see the module docstring)."""
    from systems.service_kit.faults import Fault  # noqa: PLC0415

    kinds = Counter(e.kind for e in endings)
    reasons = Counter(reason_group(e.reason) for e in endings if e.kind == "escalated")
    return {
        "tasks": len(tasks), "matched": kinds["matched"], "escalated": kinds["escalated"],
        "duplicates": sum(dup.values()), "lost": kinds["lost"], "worker_kills": pool.kills,
        "server_restarts": server.restarts, "faults": {f.value: faults.get(f.value, 0) for f in Fault},
        "p95_message_seconds": round(p95(front.message_seconds), 2),
        "unmatched": kinds["unmatched"], "duplicates_by_system": dup,
        "escalation_reasons": dict(reasons.most_common()), "messages": len(front.message_seconds),
        "message_retries": front.retries, "worker_exits": pool.exits,
        "max_seconds_between_kills": round(max((b - a for a, b in zip(pool.kill_times, pool.kill_times[1:])),
                                               default=0.0), 2), "seconds": round(seconds, 1),
        "seed": args.seed, "workers": args.workers, "fault_rate": args.fault_rate,
        "endings": [e.model_dump() for e in sorted(endings, key=lambda e: e.task_index)],
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", required=True, help="a τ-bench task file (JSON list)")
    p.add_argument("--n", type=int, required=True, help="tasks to run (a seeded sample)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workers", type=int, default=3, help="worker processes")
    p.add_argument("--fault-rate", type=float, default=0.2, help="share of effect requests that get a fault")
    p.add_argument("--concurrency", type=int, default=10, help="conversations at once")
    p.add_argument("--restarts", type=int, default=2, help="Temporal server restarts (at least 1)")
    p.add_argument("--patience", type=float, default=None,
                   help="seconds one message is resent while its outcome is unknown (default: the task timeout)")
    p.add_argument("--task-timeout", type=float, default=2400.0, help="seconds before a task counts as lost")
    p.add_argument("--settle", type=float, default=3.0, help="seconds waited before counting duplicates")
    p.add_argument("--keep", action="store_true", help="keep the run's databases and its directory (server file, logs)")
    p.add_argument("--json", help="write the report here")
    return p


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    args = parser().parse_args(argv)
    args.restarts = max(1, args.restarts)
    logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)  # "returned without completing": the drops
    from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter  # noqa: PLC0415

    # the SDK's core warns on every retried call while the server restarts: that is the point here
    Runtime.set_default(Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(
        filter=TelemetryFilter(core_level="ERROR", other_level="ERROR")))))
    board = Board(args.n)
    with board:
        result = asyncio.run(run(args, board.update))
    show(result)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
