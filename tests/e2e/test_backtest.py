"""``statekeeper backtest`` on the decision log of the 20 τ-bench dev tasks, run through a
real worker on a real Temporal server: the current prompt reproduces every call, prompt
versions that withhold a tool report the expected differences, and nothing is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

from activities.store.journal import JournalStore
from starter.ops.taubench import TauBenchRunner, load_tasks
from tests.activities.test_backtest import digest
from tests.workflow_harness import running_worker
from workflows.domain.policy.approvals import ApprovalPolicy
from workflows.domain.prompt import PROMPT_VERSION

ROOT = Path(__file__).resolve().parents[2]
DEV_TASKS = ROOT / "systems" / "retail" / "data" / "tasks_dev.json"
RETURN = "return_delivered_order_items"
READ_ORDER = "get_order_details"


def tool_of(proposal) -> str | None:
    return (proposal or {}).get("tool", {}).get("name") if (proposal or {}).get("kind") == "tool_call" else None


def backtest_cli(settings, tmp_path: Path, *args: str) -> tuple[dict, str]:
    out = tmp_path / f"backtest-{len(list(tmp_path.glob('backtest-*.json')))}.json"
    env = dict(os.environ, STATEKEEPER_DATABASE_URL=settings.resolved_database_url(),
               STATEKEEPER_JOURNAL_URL=settings.resolved_journal_url(), STATEKEEPER_DATA_DIR=str(tmp_path),
               STATEKEEPER_DEV_STATE_FILE=str(tmp_path / "no-dev.json"), COLUMNS="160")
    env.pop("ANTHROPIC_API_KEY", None)
    proc = subprocess.run([sys.executable, "-m", "starter.cli.app", "backtest", *args, "--json", str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text()), proc.stdout


async def test_backtest_on_the_dev_tasks_decision_log(temporal_env, settings, tmp_path):
    tasks = load_tasks(DEV_TASKS)
    async with running_worker(temporal_env, settings, approvals=ApprovalPolicy()) as (client, backend):
        # keep the stores and plans: the stand-in follows a benchmark conversation's plan
        report = await TauBenchRunner(client, backend, run_id="bt", keep_stores=True).run(tasks, concurrency=4)
    assert report.summary.passed == 20
    return_tasks = {f"tb-bt-{t.task_index}" for t in tasks if any(a["name"] == RETURN for a in t.actions)}
    assert len(return_tasks) == 7
    journal = JournalStore(settings.resolved_journal_url())
    logged = journal.decisions()
    journal.close()
    assert {r.conversation_id for r in logged} == {f"tb-bt-{i}" for i in range(20)}
    sor, log = sa.create_engine(settings.resolved_database_url()), sa.create_engine(settings.resolved_journal_url())
    stores = {f"tb-bt-{i}": backend.hash(f"tb-bt-{i}") for i in range(20)}
    before = (digest(sor), digest(log))

    same, printed = backtest_cli(settings, tmp_path, "--prompt-version", PROMPT_VERSION)
    assert same["calls"] == len(logged) == same["same"] > 0
    assert same["different_proposal"] == same["different_verdict"] == 0
    assert "Backtest summary" in printed and "Calls that differ" not in printed

    no_returns, printed = backtest_cli(settings, tmp_path, "--prompt-version", f"{PROMPT_VERSION}-no-returns")
    differing = [r for r in no_returns["rows"] if r["result"] != "same"]
    assert no_returns["calls"] == len(logged) and no_returns["different_verdict"] == 0
    # every difference is on a return task, a transfer instead of the return (or of reading its order first)
    assert {r["conversation_id"] for r in differing} == return_tasks
    assert all(r["result"] == "different_proposal" and r["new_proposal"]["kind"] == "transfer_to_human"
               and tool_of(r["recorded_proposal"]) in (RETURN, READ_ORDER) for r in differing)
    assert all(r in differing for r in no_returns["rows"] if tool_of(r["recorded_proposal"]) == RETURN)
    assert no_returns["same"] == len(logged) - no_returns["different_proposal"]
    assert "Calls that differ" in printed and "transfer_to_human" in printed

    no_reads, _ = backtest_cli(settings, tmp_path, "--prompt-version", f"{PROMPT_VERSION}-no-order-reads")
    reads = [r for r in no_reads["rows"] if tool_of(r["recorded_proposal"]) == READ_ORDER]
    assert reads and no_reads["different_verdict"] == len(reads) and no_reads["different_proposal"] == 0
    # the write is proposed without reading the order first, and the policy refuses it
    assert all(r["result"] == "different_verdict" and r["new_verdict"] == "rejected:check-status"
               and r["recorded_verdict"] == "accepted" for r in reads)

    one, _ = backtest_cli(settings, tmp_path, "--prompt-version", PROMPT_VERSION, "--conversation", "tb-bt-3")
    assert one["calls"] == one["same"] == len([r for r in logged if r.conversation_id == "tb-bt-3"]) > 0
    none, printed = backtest_cli(settings, tmp_path, "--prompt-version", PROMPT_VERSION, "--conversation", "nobody")
    assert none["calls"] == 0 and "no recorded model call matched the selection" in printed  # not a bare 0/0

    # executes nothing: every store, the ledger, the plans and the journal are as they were
    assert (digest(sor), digest(log)) == before
    assert {s: backend.hash(s) for s in stores} == stores
    print(f"backtest on the dev tasks: current {same['calls']} calls, {same['same']} same; no-returns "
          f"{no_returns['same']} same, {no_returns['different_proposal']} different proposal, "
          f"{no_returns['different_verdict']} different verdict; no-order-reads {no_reads['same']} same, "
          f"{no_reads['different_proposal']} different proposal, {no_reads['different_verdict']} different verdict")
