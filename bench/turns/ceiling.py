"""How far statekeeper's structure lets turns per CPU-second go: statekeeper, an older commit
(the baseline) and ``CeilingWorkflow`` (``bench/turns/ceiling_workflow.py``: the same conversation
with nothing but the round trips it needs) at C concurrent conversations on one
worker, each row on a dev server and a database of its own, in alternating order over
``--rounds``.

    python bench/turns/ceiling.py [--conversations 200] [--rounds 2] [--baseline b96e830] [--json OUT]

Prints one row per run and each code's pooled turns per CPU-second (all turns over all
worker + server CPU-seconds) as a ratio to the baseline's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import types
import uuid
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
BENCH_CODEC_KEYS = "bench-1:YmVuY2gtY29kZWMta2V5LTAxMjM0NTY3ODlhYmNkZWY="
"""The codec key of every row (``bench/turns.py``'s): payloads are sealed as in production."""


async def _ceiling_conversation(client: Any, queue: str, store: str, email: str, order_id: str,
                                latencies: list[float]) -> Any:
    """One bench conversation (authenticate, ask about the order, cancel it, confirm) as a
    ``CeilingWorkflow`` on ``queue``, each turn's seconds appended to ``latencies``; returns
    the finished workflow's handle."""
    from bench.turns.ceiling_workflow import CeilingWorkflow  # noqa: PLC0415

    handle = await client.start_workflow(CeilingWorkflow.run, store, id=f"ceiling-{uuid.uuid4().hex[:10]}",
                                         task_queue=queue)
    for text in (f"Hi, my email is {email}", f"order {order_id}", f"cancel {order_id}", "yes"):
        start = time.perf_counter()
        await handle.execute_update(CeilingWorkflow.send, text)
        latencies.append(time.perf_counter() - start)
    await handle.signal(CeilingWorkflow.finish)
    await handle.result()
    return handle


async def ceiling_run(client: Any, env: dict[str, str], backend: Any, stores: list[str], tmp: Path,
                      conversations: int, metrics_url: Optional[str] = None) -> dict[str, Any]:
    """One ``CeilingWorkflow`` row: its worker process, ``conversations`` at once, CPU as
    ``bench.turns.load.concurrency_run`` counts it (worker + server, from ``/proc``)."""
    from bench.turns.load import cpu_seconds, cpu_settled, pending_orders, server_pids, settled_requests, stop  # noqa: PLC0415

    queue = f"ceiling-{uuid.uuid4().hex[:8]}"
    log = tmp / f"{queue}.log"
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "turns" / "ceiling_workflow.py")], cwd=ROOT,
                            env={**os.environ, **env, "STATEKEEPER_TASK_QUEUE": queue},
                            stdout=log.open("ab"), stderr=subprocess.STDOUT)
    try:
        while "CEILING polling" not in log.read_text():
            if proc.poll() is not None:
                raise RuntimeError(f"the ceiling worker exited with {proc.returncode}: see {log}")
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)  # polling
        await cpu_settled([proc.pid])
        picks = pending_orders(stores)[:conversations]
        before = len(backend.ledger_entries(stores[0]))
        servers = server_pids()
        requests_before = await settled_requests(metrics_url)
        cpu_before = cpu_seconds(proc.pid), sum(cpu_seconds(p) for p in servers)
        latencies: list[float] = []
        start = time.perf_counter()
        results = await asyncio.gather(*(_ceiling_conversation(client, queue, *pick, latencies) for pick in picks),
                                       return_exceptions=True)
        wall = time.perf_counter() - start
        worker_cpu = cpu_seconds(proc.pid) - cpu_before[0]
        server_cpu = sum(cpu_seconds(p) for p in servers) - cpu_before[1]
        requests = await settled_requests(metrics_url) - requests_before
    finally:
        stop([proc])
    failed = [r for r in results if isinstance(r, BaseException)]
    if failed:
        print(f"ceiling: {len(failed)} failed, first: {failed[0]!r}", flush=True)
    turns = len(latencies)
    return {"conversations": len(picks), "turns": turns, "failed": len(failed), "turns_per_second": turns / wall,
            "turns_per_cpu_second": turns / (worker_cpu + server_cpu), "worker_cpu_seconds": worker_cpu,
            "server_cpu_seconds": server_cpu, "writes": len(backend.ledger_entries(stores[0])) - before,
            "duplicates": backend.duplicate_writes(stores[0]),
            "server_requests_per_turn": {k: round(v / max(turns, 1), 2) for k, v in sorted(requests.items())}}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from bench.turns.run import _uncompressed, baseline_tree  # noqa: PLC0415
    from bench.turns.load import concurrency_run  # noqa: PLC0415
    from bench.turns.server import fresh_row  # noqa: PLC0415

    tmp = Path(tempfile.mkdtemp(prefix="bench-ceiling-"))
    server_args = types.SimpleNamespace(server_defaults=False, dynamic_config=[])
    worker_env = {"STATEKEEPER_DATA_DIR": str(tmp), "STATEKEEPER_CODEC_KEYS": os.environ["STATEKEEPER_CODEC_KEYS"]}
    baseline = baseline_tree(args.baseline, tmp)
    codes = [("current", ROOT), (f"baseline-{args.baseline}", baseline), ("ceiling", ROOT)]
    rows: list[dict[str, Any]] = []
    try:
        for round_ in range(args.rounds):
            for label, root in codes if round_ % 2 == 0 else codes[::-1]:
                async with fresh_row(server_args, tmp, worker_env) as (server, metrics, row_env, backend):
                    store = f"c{uuid.uuid4().hex[:6]}"
                    backend.seed_store(store)
                    if label == "ceiling":
                        row = await ceiling_run(server, row_env, backend, [store], tmp, args.conversations, metrics)
                    else:
                        client = server if root == ROOT else await _uncompressed(server)
                        row = await concurrency_run(client, row_env, backend, [store], tmp, args.conversations, 1,
                                                    root, 1, metrics)
                row.update(code=label, round=round_ + 1)
                rows.append(row)
                print(f"{label} round {round_ + 1}: {row['turns']} turns, {row['turns_per_cpu_second']:.2f} turns "
                      f"per CPU-second (worker {row['worker_cpu_seconds']:.1f} + server "
                      f"{row['server_cpu_seconds']:.1f} s), {row['failed']} failed", flush=True)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(baseline)], cwd=ROOT, capture_output=True)
    return {"conversations": args.conversations, "baseline": args.baseline, "rows": rows,
            "pooled": _pooled(rows, f"baseline-{args.baseline}")}


def _pooled(rows: list[dict[str, Any]], baseline: str) -> dict[str, dict[str, float]]:
    """Each code's turns over its CPU-seconds in all rounds, and that as a ratio to the baseline's."""
    pooled = {}
    for code in dict.fromkeys(r["code"] for r in rows):
        mine = [r for r in rows if r["code"] == code]
        cpu = sum(r["worker_cpu_seconds"] + r["server_cpu_seconds"] for r in mine)
        pooled[code] = {"turns_per_cpu_second": sum(r["turns"] for r in mine) / cpu,
                        "worker_cpu_per_turn_ms": 1000 * sum(r["worker_cpu_seconds"] for r in mine)
                        / sum(r["turns"] for r in mine),
                        "server_cpu_per_turn_ms": 1000 * sum(r["server_cpu_seconds"] for r in mine)
                        / sum(r["turns"] for r in mine)}
    for code in pooled:
        pooled[code]["ratio"] = pooled[code]["turns_per_cpu_second"] / pooled[baseline]["turns_per_cpu_second"]
    return pooled


def show(report: dict[str, Any]) -> None:
    """The pooled figures as a table."""
    from rich.console import Console  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    table = Table(title=f"{report['conversations']} conversations, 1 worker, pooled over "
                        f"{max(r['round'] for r in report['rows'])} rounds")
    for column in ("code", "turns/CPU-s", f"× {report['baseline']}", "worker ms CPU/turn", "server ms CPU/turn"):
        table.add_column(column, justify="left" if column == "code" else "right")
    for code, p in report["pooled"].items():
        table.add_row(code, f"{p['turns_per_cpu_second']:.2f}", f"{p['ratio']:.2f}x",
                      f"{p['worker_cpu_per_turn_ms']:.1f}", f"{p['server_cpu_per_turn_ms']:.1f}")
    Console().print(table)


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline", default="b96e830", help="the older commit (a git revision)")
    parser.add_argument("--json", help="write the rows and pooled figures to this file")
    args = parser.parse_args()
    os.environ.setdefault("STATEKEEPER_CODEC_KEYS", BENCH_CODEC_KEYS)  # here, not on import: tests import this
    report = asyncio.run(main(args))
    show(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    cli()
