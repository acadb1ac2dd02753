"""A 1,000-turn conversation across continue-as-new runs: how many runs, the events of each
(Temporal's guidance: under 10,000 per run), per-turn latency at the start and at the end,
and whether its state is intact at the end.

One Temporal dev server (default limits: it suggests continuing as new at 4,096 events), a
worker in this process (production sandbox settings, SQLite) and the bench's stand-in model
(``bench.turns.worker_process.brain``). The conversation: turn 1 authenticates, turn 2 asks to cancel
an order (shown), turn 3 confirms (the write runs), turn 4 names another order (a fact pinned at
turn 4), and every later turn asks for that order's status (one read and two model calls).
Checked at the end: the turn count, the turn-4 fact, the cancel's step done at turn 2 and
one ledger entry.

Run: ``.venv/bin/python bench/turns/long.py [--turns 1000] [--json OUT]``. Wall-clock on
whatever else runs on the machine.
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

EMAIL, PENDING, OTHER = "raj.sanchez2046@example.com", "#W4566809", "#W1067251"
"""A τ-bench customer, a pending order of theirs (cancelled at turn 3) and another one (turn 4)."""


async def long_run(turns: int) -> dict:
    """The figures of one conversation of ``turns`` turns (see the module docstring)."""
    from temporalio.testing import WorkflowEnvironment  # noqa: PLC0415

    from activities.llm.model_activity import ModelActivities, offline_client  # noqa: PLC0415
    from activities.retail_port import RetailPort  # noqa: PLC0415
    from activities.tools import ToolActivities  # noqa: PLC0415
    from bench.turns.worker_process import brain  # noqa: PLC0415
    from settings import Settings  # noqa: PLC0415
    from starter.client.conversations import StatekeeperClient  # noqa: PLC0415
    from starter.runtime.connection import data_converter  # noqa: PLC0415
    from starter.dev.server import DEV_SERVER_STARTUP  # noqa: PLC0415
    from tests.workflow_harness import NO_APPROVALS  # noqa: PLC0415
    from starter.runtime.worker import build_backend, build_worker  # noqa: PLC0415
    from workflows.options import SEARCH_ATTRIBUTES  # noqa: PLC0415
    from workflows.conversation.workflow import support_workflow_id  # noqa: PLC0415

    tmp = Path(tempfile.mkdtemp(prefix="bench-long-"))
    env = await WorkflowEnvironment.start_local(
        dev_server_startup_timeout=DEV_SERVER_STARTUP,
        dev_server_existing_path=str(Path(sys.executable).parent / "temporal"), data_converter=data_converter(),
        search_attributes=list(SEARCH_ATTRIBUTES), dev_server_log_level="error")
    try:
        temporal = env.client
        settings = Settings(database_url=f"sqlite:///{tmp / 'long.sqlite'}", data_dir=tmp,
                            task_queue=f"long-{uuid.uuid4().hex[:6]}", anthropic_api_key=None)
        backend = build_backend(settings)
        model = ModelActivities(offline_client(30.0, brain=brain), model="bench-brain")
        port = RetailPort(backend)
        tools = ToolActivities(tools=port, outbox=port, tickets=port)
        latencies: list[float] = []
        async with build_worker(temporal, settings, backend, model=model, tools=tools):
            client = StatekeeperClient(temporal, settings.task_queue, approvals=NO_APPROVALS)
            cid = await client.start_conversation(f"long-{uuid.uuid4().hex[:6]}")
            script = [f"Hi, my email is {EMAIL}", f"cancel {PENDING}", "yes", f"order {OTHER}"]
            start = time.perf_counter()
            for turn in range(1, turns + 1):
                text = script[turn - 1] if turn <= len(script) else f"order {OTHER} (turn {turn})"
                began = time.perf_counter()
                await client.send_message(cid, text)
                latencies.append(time.perf_counter() - began)
            wall = time.perf_counter() - start
            state = await client.state(cid)
        runs = []
        async for execution in temporal.list_workflows(f"WorkflowId = '{support_workflow_id(cid)}'"):
            history = await temporal.get_workflow_handle(execution.id, run_id=execution.run_id).fetch_history()
            runs.append({"start": execution.start_time.isoformat(), "events": len(history.events),
                         "bytes": sum(e.ByteSize() for e in history.events)})
        runs.sort(key=lambda r: r["start"])
        first, last = latencies[4:54], latencies[-50:]
        return {
            "turns": turns, "wall_seconds": wall, "runs": len(runs), "events_per_run": [r["events"] for r in runs],
            "max_events_per_run": max(r["events"] for r in runs), "max_bytes_per_run": max(r["bytes"] for r in runs),
            "turn_ms_p50": {"turns 5-54": statistics.median(first) * 1000, "last 50": statistics.median(last) * 1000},
            "state_intact": {
                "turn": state.turn == turns,
                "turn_4_fact": any(f.value == OTHER and f.turn == 4 for f in state.pinned_facts),
                "cancel_step_done": [(s.turn, s.status.value) for s in state.steps if s.operation_id] == [(2, "done")],
                "one_ledger_entry": len(backend.ledger_entries("main")) == 1 and backend.duplicate_writes("main") == 0,
            },
        }
    finally:
        await env.shutdown()


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    report = asyncio.run(long_run(args.turns))
    print(f"{report['turns']} turns in {report['wall_seconds']:.0f} s across {report['runs']} runs; events per run "
          f"{report['events_per_run']} (max {report['max_events_per_run']}, {report['max_bytes_per_run'] / 1024:.0f} KiB)")
    print(f"turn latency p50: {report['turn_ms_p50']['turns 5-54']:.0f} ms at turns 5-54, "
          f"{report['turn_ms_p50']['last 50']:.0f} ms over the last 50")
    print("state intact: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in report["state_intact"].items()))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    cli()
