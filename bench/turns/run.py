"""Per-turn latency, history per turn, recovery after a SIGKILL, and throughput by concurrency
and worker count: every comparison measured in the same run (each concurrency row on a dev
server and a database of its own, ``bench/turns/server.py``).

- ``per_turn_ms``: median wall time of a turn with one read (model → read → model → reply)
  for statekeeper (a worker in this process, production sandbox settings), a bare Temporal
  workflow with the same round trips (``bench/turns/bare.py``) and the same loop in process.
- ``history``: events and bytes (as stored: payloads encrypted and compressed by the codec)
  per such turn, from the conversation's history.
- ``recovery_seconds``: restart-to-reply after a SIGKILL during a model call, a read and a
  write (``bench/turns/recovery.py``), p50/p95 of N, with the effects counted: from starting
  a new worker process (its Python startup included); ``failover_seconds``: from the kill,
  with another worker already polling.
- ``concurrency``: C conversations at once on W worker processes (``bench/turns/load.py``),
  each authenticating, reading an order, cancelling it and confirming; with ``--baseline REV``
  the same rows (1 worker) for that commit's code (checked out with ``git worktree add`` into
  a temporary directory) in the same run; ``--unsandboxed`` adds rows of workers without the
  workflow sandbox (``Settings.workflow_sandbox``); ``--rounds N`` runs the rows N times in
  alternating order; ``--read-turns N`` asks about the order N times per conversation; each
  row has the server's request counters per turn (``server_requests_per_turn``: frontend RPCs,
  persistence operations and eager activity starts); ``--baseline-server own`` runs the
  baseline's rows on the dev server its commit shipped (``both``: a row of each).

Run: ``.venv/bin/python bench/turns.py [--quick] [--json OUT] [--baseline b96e830]``. The
offline stand-in model answers (``bench.turns.worker_process.brain``); figures are wall-clock on
whatever else the machine runs at the time, so compare rows of one run, not runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("STATEKEEPER_CODEC_KEYS", "bench-1:YmVuY2gtY29kZWMta2V5LTAxMjM0NTY3ODlhYmNkZWY=")

from bench.turns.report import show  # noqa: E402

from bench.turns.server import (backend_on, dev_server, drop_database, fresh_row, postgres_database,  # noqa: E402
                                 shipped_dynamic_config)


async def per_turn(temporal, tmp: Path, turns: int) -> tuple[dict, dict]:
    """``(per_turn_ms, history)`` for statekeeper, bare and in-process (see the module docstring)."""
    from temporalio.worker import Worker  # noqa: PLC0415

    from activities.llm.model_activity import ModelActivities, offline_client  # noqa: PLC0415
    from activities.retail_port import RetailPort  # noqa: PLC0415
    from activities.tools import ToolActivities  # noqa: PLC0415
    from bench.turns.bare import BareActivities, BareWorkflow, in_process_turn  # noqa: PLC0415
    from bench.turns.worker_process import brain  # noqa: PLC0415
    from settings import Settings  # noqa: PLC0415
    from starter.client.conversations import StatekeeperClient  # noqa: PLC0415
    from tests.workflow_harness import NO_APPROVALS  # noqa: PLC0415
    from starter.runtime.worker import build_backend, build_worker  # noqa: PLC0415

    settings = Settings(database_url=f"sqlite:///{tmp / 'latency.sqlite'}", data_dir=tmp,
                        task_queue=f"lat-{uuid.uuid4().hex[:6]}", anthropic_api_key=None)
    backend = build_backend(settings)
    model = ModelActivities(offline_client(30.0, brain=brain), model="bench-brain")
    port = RetailPort(backend)
    tools = ToolActivities(tools=port, outbox=port, tickets=port)
    acts = BareActivities(model, tools)
    order = "#W7736708"
    times: dict[str, list[float]] = {"statekeeper": [], "bare": [], "in_process": []}
    async with build_worker(temporal, settings, backend, model=model, tools=tools):
        client = StatekeeperClient(temporal, settings.task_queue, approvals=NO_APPROVALS)
        cid = await client.start_conversation(f"lat-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, "Hi, my email is raj.sanchez2046@example.com")
        handle = temporal.get_workflow_handle(f"support-{cid}")
        marks = []
        for _ in range(turns):
            await asyncio.sleep(0.3)  # the turn's journal write lands in this turn's events
            marks.append(len((await handle.fetch_history()).events))
            start = time.perf_counter()
            await client.send_message(cid, f"order {order}")
            times["statekeeper"].append(time.perf_counter() - start)
        await asyncio.sleep(0.5)
        events = (await handle.fetch_history()).events
        marks.append(len(events))
    spans = [(a, b) for a, b in zip(marks, marks[1:])]
    history = {"events_per_turn": statistics.median(b - a for a, b in spans),
               "bytes_per_turn": statistics.median(sum(e.ByteSize() for e in events[a:b]) for a, b in spans)}
    queue = f"bare-{uuid.uuid4().hex[:6]}"
    async with Worker(temporal, task_queue=queue, workflows=[BareWorkflow],
                      activities=[acts.bare_model, acts.bare_read]):
        bare = await temporal.start_workflow(BareWorkflow.run, id=f"bare-{uuid.uuid4().hex[:6]}", task_queue=queue)
        for _ in range(turns):
            # paced as statekeeper's turns above: back to back, the bare turns slowed from ~40 to
            # ~150 ms after about eight (each workflow task waited ~40 ms on its sticky queue)
            await asyncio.sleep(0.3)
            start = time.perf_counter()
            await bare.execute_update(BareWorkflow.turn, f"order {order}")
            times["bare"].append(time.perf_counter() - start)
        await bare.signal(BareWorkflow.finish)
    for turn in range(turns):
        start = time.perf_counter()
        await in_process_turn(acts, f"order {order}", turn + 1)
        times["in_process"].append(time.perf_counter() - start)
    return {k: statistics.median(v) * 1000 for k, v in times.items()}, history


async def _uncompressed(temporal):
    """A client like ``temporal`` whose codec seals payloads uncompressed (``EncryptionCodec``)."""
    import dataclasses  # noqa: PLC0415

    from temporalio.client import Client  # noqa: PLC0415

    from starter.runtime.codec import EncryptionCodec  # noqa: PLC0415

    converter = dataclasses.replace(temporal.data_converter, payload_codec=EncryptionCodec(
        temporal.data_converter.payload_codec.keyring, compress=False))
    return await Client.connect(temporal.service_client.config.target_host, namespace=temporal.namespace,
                                data_converter=converter)


def baseline_tree(rev: str, tmp: Path) -> Path:
    """``rev`` checked out beside this one (``git worktree add --detach``)."""
    path = tmp / f"baseline-{rev}"
    subprocess.run(["git", "worktree", "add", "--detach", str(path), rev], cwd=ROOT, check=True,
                   capture_output=True)
    return path


async def main(args: argparse.Namespace) -> dict:
    from bench.turns.load import concurrency_run  # noqa: PLC0415
    from bench.turns.recovery import recovery  # noqa: PLC0415

    tmp = Path(tempfile.mkdtemp(prefix="bench-turns-"))
    env, metrics_url = await dev_server(args)
    report: dict = {}
    baseline = database = None
    try:
        temporal = env.client
        if not args.recovery_only:
            report["per_turn_ms"], report["history"] = await per_turn(temporal, tmp, args.turns)
        database = postgres_database() or f"sqlite:///{tmp / 'sor.sqlite'}"
        worker_env = {"STATEKEEPER_TEMPORAL_ADDRESS": temporal.service_client.config.target_host,
                      "STATEKEEPER_DATABASE_URL": database, "STATEKEEPER_JOURNAL_URL": database,
                      "STATEKEEPER_DATA_DIR": str(tmp), "STATEKEEPER_CODEC_KEYS": os.environ["STATEKEEPER_CODEC_KEYS"]}
        worker_env.pop("ANTHROPIC_API_KEY", None)
        backend = backend_on(database)
        report["system_of_record"] = database.split(":")[0]
        store = f"rec{uuid.uuid4().hex[:6]}"
        backend.seed_store(store)
        report["recovery_seconds"], report["failover_seconds"] = {}, {}
        if args.baseline:
            baseline = baseline_tree(args.baseline, tmp)
        if args.repeats and "restart" in args.modes:
            report["recovery_seconds"] = await recovery(temporal, worker_env, backend, store, tmp, args.repeats,
                                                        args.kinds, timelines=args.timeline)
        if args.repeats and "failover" in args.modes:
            report["failover_seconds"] = await recovery(temporal, worker_env, backend, store, tmp, args.repeats,
                                                        args.kinds, standby=True, first_pick=3 * args.repeats,
                                                        timelines=args.timeline)
        if args.repeats and baseline is not None:
            # the same kills on the baseline's code, after the current code's (picks 6 × repeats on)
            old = await _uncompressed(temporal)
            report["baseline"] = args.baseline
            for n, (mode, key) in enumerate((("restart", "baseline_recovery_seconds"),
                                             ("failover", "baseline_failover_seconds"))):
                if mode in args.modes:
                    report[key] = await recovery(old, worker_env, backend, store, tmp,
                                                 args.baseline_repeats or args.repeats, args.kinds,
                                                 standby=mode == "failover", first_pick=(6 + 3 * n) * args.repeats,
                                                 timelines=args.timeline, root=baseline)
        report["concurrency"] = []
        if not args.shared_server and not args.recovery_only:
            await env.shutdown()  # each row gets its own (bench.turns.server); an idle one's CPU is not a row's
            env = None
        for conversations in [] if args.recovery_only else args.conversations:
            for workers in args.workers:
                variants = [("current", ROOT, {})]
                if args.unsandboxed:
                    variants.append(("current-unsandboxed", ROOT, {"STATEKEEPER_WORKFLOW_SANDBOX": "false"}))
                for label, settings in args.variant:
                    variants.append((f"current-{label}", ROOT, settings))
                if baseline and workers == 1:
                    if args.baseline_server in ("current", "both"):
                        variants.append((f"baseline-{args.baseline}", baseline, {}))
                    if args.baseline_server in ("own", "both"):
                        variants.append((f"baseline-{args.baseline}-own-server", baseline, {}))
                # rounds alternate the order, so a drift of the machine's load over the run
                # weighs on every variant alike
                rounds = [(n, v) for n in range(args.rounds) for v in (variants if n % 2 == 0 else variants[::-1])]
                for round_, (label, root, extra) in rounds:
                    # the baseline's rows on the server it shipped with, when asked (--baseline-server own)
                    config = shipped_dynamic_config(root) if label.endswith("-own-server") else None
                    async with _row_parts(args, tmp, temporal, metrics_url, worker_env, backend, config) as parts:
                        server, row_metrics, row_env, row_backend = parts
                        # the baseline's codec predates compression: its client must not compress
                        client = server if root == ROOT else await _uncompressed(server)
                        stores = [f"c{uuid.uuid4().hex[:6]}" for _ in range(-(-conversations // 274))]
                        for s in stores:
                            row_backend.seed_store(s)
                        row = await concurrency_run(client, {**row_env, **extra}, row_backend, stores, tmp,
                                                    conversations, workers, root, args.read_turns, row_metrics)
                    row["code"], row["round"] = label, round_ + 1
                    report["concurrency"].append(row)
                    print(f"{label} round {round_ + 1}: {row['turns']} turns, {row['turns_per_cpu_second']:.2f} turns "
                          f"per CPU-second, {row['failed']} failed", flush=True)
    finally:
        if baseline is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(baseline)], cwd=ROOT, capture_output=True)
        if env is not None:
            await env.shutdown()
        if database is not None:
            drop_database(database)
    return report


@contextlib.asynccontextmanager
async def _row_parts(args, tmp, temporal, metrics_url, worker_env, backend, config=None):
    """A concurrency row's server client, metrics URL, workers' environment and backend: its
    own (``bench.turns.server.fresh_row``, with dynamic config ``config``), or the run's with
    ``--shared-server``."""
    if args.shared_server:
        yield temporal, metrics_url, worker_env, backend
        return
    async with fresh_row(args, tmp, worker_env, config) as parts:
        yield parts


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a reduced run (under two minutes)")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--baseline", help="also run the concurrency rows (1 worker) and the recovery kills on this "
                                           "commit (a git revision)")
    parser.add_argument("--unsandboxed", action="store_true",
                        help="also run each concurrency row with STATEKEEPER_WORKFLOW_SANDBOX=false")
    parser.add_argument("--variant", action="append", default=[], metavar="LABEL:KEY=VALUE[,KEY=VALUE]",
                        help="also run each concurrency row with these worker settings, e.g. "
                             "slots:STATEKEEPER_MAX_CONCURRENT_ACTIVITIES=16 (repeatable)")
    parser.add_argument("--turns", type=int, default=20, help="turns timed for the per-turn latency")
    parser.add_argument("--repeats", type=int, default=10, help="SIGKILLs per kind and mode (0: no recovery runs)")
    parser.add_argument("--recovery-only", action="store_true",
                        help="only the SIGKILL recovery rows (no per-turn latency, no concurrency)")
    parser.add_argument("--kinds", default="model,read,write", help="recovery: kills during these (comma-separated)")
    parser.add_argument("--modes", default="restart,failover", help="recovery: restart and/or failover")
    parser.add_argument("--timeline", action="store_true", help="recovery: print each kill's timeline")
    parser.add_argument("--server-defaults", action="store_true",
                        help="run the dev server without statekeeper's dynamic config (starter.dev.server.DYNAMIC_CONFIG)")
    parser.add_argument("--shared-server", action="store_true",
                        help="concurrency: every row on the run's one server and database (default: a fresh pair per row)")
    parser.add_argument("--dynamic-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a dynamic config value of the dev server, e.g. "
                             "'history.timerProcessorMaxTimeShift=\"100ms\"' (repeatable; default: none)")
    parser.add_argument("--baseline-server", choices=("current", "own", "both"), default="current",
                        help="the dev server of --baseline's rows: with today's dynamic config (current, as every "
                             "other row), with the one its commit shipped (own: none in the oldest commits), or a row of each")
    parser.add_argument("--baseline-repeats", type=int, default=0,
                        help="SIGKILLs per kind and mode on the --baseline code (default: --repeats)")
    parser.add_argument("--conversations", default="50,200,500", help="concurrency: conversations at once, comma-separated")
    parser.add_argument("--rounds", type=int, default=1,
                        help="concurrency: run every row this many times, in alternating order")
    parser.add_argument("--read-turns", type=int, default=1,
                        help="concurrency: turns asking about the order per conversation (each with one read)")
    parser.add_argument("--workers", default="1,2,4", help="concurrency: worker processes, comma-separated")
    args = parser.parse_args()
    for name, quick in (("turns", 8), ("repeats", 1), ("conversations", "20"), ("workers", "1,2")) if args.quick else ():
        if getattr(args, name) == parser.get_default(name):  # --quick sizes only what no option set
            setattr(args, name, quick)
    args.conversations = [int(c) for c in str(args.conversations).split(",")]
    args.workers = [int(w) for w in str(args.workers).split(",")]
    args.kinds = tuple(args.kinds.split(","))
    args.modes = tuple(args.modes.split(","))
    args.variant = [(v.split(":", 1)[0], dict(kv.split("=", 1) for kv in v.split(":", 1)[1].split(",")))
                    for v in args.variant]
    report = asyncio.run(main(args))
    show(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    cli()
