"""The chaos suite, small: a few τ-bench dev tasks on PostgreSQL while
worker processes are SIGKILLed every few seconds, the payments, email and ticketing services
fail in every way they can, and the Temporal dev server is killed and restarted on its
database file; nothing is lost and nothing happens twice.

Real everything: ``bench.chaos.run.run`` makes its own PostgreSQL databases, dev server, worker
processes and services. Fixed seed; shorter service and write timeouts than the defaults so
the faults that wait for a timeout cost seconds, not tens of seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.chaos.run import parser, run
from systems.service_kit.faults import Fault

DEV_TASKS = Path(__file__).resolve().parents[2] / "systems" / "retail" / "data" / "tasks_dev.json"


@pytest.mark.timeout(900)
async def test_small_chaos_run_loses_nothing_and_applies_nothing_twice(monkeypatch):
    monkeypatch.setenv("STATEKEEPER_SERVICES_TIMEOUT_SECONDS", "3")
    monkeypatch.setenv("STATEKEEPER_WRITE_TIMEOUT_SECONDS", "15")
    args = parser().parse_args(["--tasks", str(DEV_TASKS), "--n", "6", "--seed", "7", "--workers", "3",
                                "--fault-rate", "0.7", "--concurrency", "6", "--restarts", "1", "--settle", "1",
                                "--task-timeout", "700"])
    result = await run(args)
    endings = result["endings"]
    assert len(endings) == result["tasks"] == 6
    assert result["duplicates"] == 0, result["duplicates_by_system"]
    assert [e for e in endings if e["kind"] not in ("matched", "escalated")] == []  # none lost or unmatched
    assert result["lost"] == 0
    assert all(e["reason"] for e in endings if e["kind"] == "escalated")
    assert result["worker_kills"] >= 1
    assert result["server_restarts"] >= 1
    assert {kind for kind, n in result["faults"].items() if n} == {f.value for f in Fault}, result["faults"]
