"""Many open, idle conversations on one worker: the worker's memory, and the latency of a
message to a conversation evicted from the worker's workflow cache against one still cached,
both measured in the same run.

One Temporal dev server, one bench worker process (``bench/turns/worker_process.py``) whose workflow
cache holds ``--cache`` conversations (``STATEKEEPER_MAX_CACHED_WORKFLOWS``); N conversations
are opened (start with the ``open`` update, then idle, waiting for a message), ``--parallel``
at a time. The worker's resident memory (VmRSS from ``/proc``) is read before and after;
then ``hello`` goes to ``--samples`` conversations opened first (evicted: the worker fetches
and replays their history) and to as many opened last (cached), one at a time, each timed
to its reply (one model call of the stand-in).

Run: ``.venv/bin/python bench/turns/idle.py [--conversations 10000] [--cache 200] [--json OUT]``
(``--quick``: 500 conversations and 10 samples, unless given). Wall-clock on whatever else runs on the machine: compare
the rows of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("STATEKEEPER_CODEC_KEYS", "bench-1:YmVuY2gtY29kZWMta2V5LTAxMjM0NTY3ODlhYmNkZWY=")


def rss_mib(pid: int) -> float:
    """Resident memory of process ``pid`` in MiB (``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def summary(seconds: list[float]) -> dict[str, float]:
    """``{"n", "p50", "p95", "max"}`` of ``seconds``."""
    ordered = sorted(seconds)
    return {"n": len(ordered), "p50": statistics.median(ordered),
            "p95": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))], "max": ordered[-1]}


async def idle_run(conversations: int, cache: int, samples: int, parallel: int) -> dict:
    """The figures of one run (see the module docstring)."""
    from temporalio.testing import WorkflowEnvironment  # noqa: PLC0415

    from bench.turns.server import drop_database, postgres_database  # noqa: PLC0415
    from bench.turns.load import cpu_seconds, spawn_worker, stop  # noqa: PLC0415
    from settings import Settings  # noqa: PLC0415
    from starter.client.conversations import StatekeeperClient  # noqa: PLC0415
    from starter.runtime.connection import data_converter  # noqa: PLC0415
    from starter.dev.server import DEV_SERVER_STARTUP  # noqa: PLC0415
    from starter.client.core import Deadlines  # noqa: PLC0415
    from systems.retail.backend import RetailBackend, make_engine  # noqa: PLC0415
    from tests.workflow_harness import NO_APPROVALS  # noqa: PLC0415
    from workflows.options import SEARCH_ATTRIBUTES  # noqa: PLC0415

    tmp = Path(tempfile.mkdtemp(prefix="bench-idle-"))
    env = await WorkflowEnvironment.start_local(
        dev_server_startup_timeout=DEV_SERVER_STARTUP,
        dev_server_existing_path=str(Path(sys.executable).parent / "temporal"), data_converter=data_converter(),
        search_attributes=list(SEARCH_ATTRIBUTES), dev_server_log_level="error")
    worker = database = None
    try:
        temporal = env.client
        database = postgres_database() or f"sqlite:///{tmp / 'sor.sqlite'}"
        backend = RetailBackend(make_engine(Settings(database_url=database).resolved_database_url()))
        backend.create_schema()
        store = f"idle{uuid.uuid4().hex[:6]}"
        backend.seed_store(store)
        queue = f"idle-{uuid.uuid4().hex[:8]}"
        worker = spawn_worker({
            "STATEKEEPER_TEMPORAL_ADDRESS": temporal.service_client.config.target_host,
            "STATEKEEPER_DATABASE_URL": database, "STATEKEEPER_JOURNAL_URL": database,
            "STATEKEEPER_DATA_DIR": str(tmp), "STATEKEEPER_TASK_QUEUE": queue,
            "STATEKEEPER_MAX_CACHED_WORKFLOWS": str(cache)}, tmp / "starter.runtime.worker.log")
        client = StatekeeperClient(temporal, queue, approvals=NO_APPROVALS,
                                   deadlines=Deadlines(rpc_seconds=60, reply_seconds=300, accept_seconds=60))
        while not await client.worker_polling():
            await asyncio.sleep(0.2)
        # one conversation through a message first: the worker's imports and first replay are done
        warm = await client.start_conversation(f"idle-warm-{uuid.uuid4().hex[:6]}", store=store)
        await client.send_message(warm, "hello")
        rss_before = rss_mib(worker.pid)
        ids: list[str] = []
        gate = asyncio.Semaphore(parallel)

        failed: list[BaseException] = []

        async def open_one(i: int) -> None:
            cid = f"idle-{i:05d}-{uuid.uuid4().hex[:6]}"
            async with gate:
                for attempt in range(3):  # an overloaded worker may not accept the open in time: again
                    try:
                        ids.append(await client.start_conversation(cid, store=store))
                        return
                    except Exception as err:  # noqa: BLE001 - counted below, the run goes on
                        if attempt == 2:
                            failed.append(err)

        cpu_before, start = cpu_seconds(worker.pid), time.perf_counter()
        await asyncio.gather(*(open_one(i) for i in range(conversations)))
        open_seconds, open_cpu = time.perf_counter() - start, cpu_seconds(worker.pid) - cpu_before
        await asyncio.sleep(2.0)
        rss_after = rss_mib(worker.pid)
        ids.sort()  # by their number: opened first, first
        timed: dict[str, list[float]] = {"evicted": [], "cached": []}
        for kind, picks in (("evicted", ids[:samples]), ("cached", ids[-samples:])):
            for cid in picks:
                start = time.perf_counter()
                reply = await client.send_message(cid, "hello")
                timed[kind].append(time.perf_counter() - start)
                assert reply.text, "no reply"
        return {"conversations": len(ids), "not_opened": len(failed), "max_cached_workflows": cache,
                "worker_rss_mib": {"before": rss_before, "after": rss_after,
                                   "per_conversation_kib": (rss_after - rss_before) * 1024 / max(len(ids), 1)},
                "open_seconds": open_seconds, "open_worker_cpu_seconds": open_cpu,
                "message_seconds": {k: summary(v) for k, v in timed.items()}}
    finally:
        if worker is not None:
            stop([worker])
        await env.shutdown()
        if database is not None:
            drop_database(database)  # the run's own database, as bench/turns.py drops its


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=None, help="default 10000 (--quick: 500)")
    parser.add_argument("--cache", type=int, default=200, help="the worker's max_cached_workflows")
    parser.add_argument("--samples", type=int, default=None,
                        help="messages timed to evicted and to cached conversations (default 20; --quick: 10)")
    parser.add_argument("--parallel", type=int, default=20, help="conversations being opened at once")
    parser.add_argument("--quick", action="store_true", help="500 conversations, 10 samples (unless given)")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    if args.conversations is None:  # --quick --conversations 50 ran 500
        args.conversations = 500 if args.quick else 10_000
    if args.samples is None:
        args.samples = 10 if args.quick else 20
    report = asyncio.run(idle_run(args.conversations, args.cache, args.samples, args.parallel))
    m, r = report["message_seconds"], report["worker_rss_mib"]
    print(f"{report['conversations']} idle conversations ({report['not_opened']} not opened), worker cache {report['max_cached_workflows']}: opened in "
          f"{report['open_seconds']:.0f} s ({report['open_worker_cpu_seconds']:.0f} worker CPU-s); worker RSS "
          f"{r['before']:.0f} -> {r['after']:.0f} MiB ({r['per_conversation_kib']:.1f} KiB per conversation)")
    for kind in ("evicted", "cached"):
        print(f"message to {'an' if kind[0] in 'aeiou' else 'a'} {kind} conversation: p50 {m[kind]['p50'] * 1000:.0f} ms, p95 {m[kind]['p95'] * 1000:.0f} ms,"
              f" max {m[kind]['max'] * 1000:.0f} ms (n={m[kind]['n']})")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    cli()
