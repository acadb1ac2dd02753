"""The τ-bench runner end to end: the 20 dev tasks on a real Temporal server (also with the
external services: the tasks still match their hashes while the money moves in the payments
service, once per write, and the return/exchange emails go out through the email service,
once each), and the real CLI (its own embedded server) on a task file with reads, calculate
and outputs; and its report tables print what the report holds (with a background webhook
listener, its delivered, verified and failed counts; a policy refusal is
``tool: [rule] reason``: rich must not take ``[modify-payment]`` for markup, which would hide
which clause refused the action).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx

from settings import Settings
from starter.cli import app as cli
from starter.ops.taubench import TauBenchRunner, load_tasks
from systems.retail import load_data
from systems.retail.hashing import data_hash
from systems.retail.tools import run_tool
from tests.service_fixtures import services  # noqa: F401 - fixture
from tests.workflow_harness import running_worker
from workflows.domain.catalogue import CATALOGUE
from workflows.domain.actions import make_tool_call
from workflows.domain.catalogue import REFUND_TOOLS
from workflows.domain.catalogue.amounts import money
from workflows.domain.catalogue.folds import order_fact
from workflows.domain.policy.approvals import ApprovalPolicy, required_approval
from tests.ports import free_port


ROOT = Path(__file__).resolve().parents[2]
DEV_TASKS = ROOT / "systems" / "retail" / "data" / "tasks_dev.json"


async def test_all_20_dev_tasks_pass_with_no_duplicate_writes(temporal_env, settings):
    tasks = load_tasks(DEV_TASKS)
    assert len(tasks) == 20
    # the default approval policy (500.00 threshold, policy flags): the runner is the supervisor
    async with running_worker(temporal_env, settings, approvals=ApprovalPolicy()) as (client, backend):
        report = await TauBenchRunner(client, backend, run_id="dev").run(tasks, concurrency=4)  # as on PostgreSQL
    failures = [(t.task_index, t.reason) for t in report.tasks if not t.passed]
    assert failures == []
    assert report.summary.passed == 20 and report.summary.duplicate_writes == 0
    # reads the state calls for, batched reads and replies the workflow words keep it near one call a message
    assert 0 < report.summary.model_calls_per_message <= 1.3, report.summary
    assert report.summary.writes == sum(len(t.actions) for t in tasks)  # dev tasks list only writes
    # the runner, as supervisor, approved exactly the writes the approval policy holds back
    assert report.summary.approvals_granted == expected_approvals(tasks) > 0
    assert [t.approvals_granted for t in report.tasks] == [expected_approvals([t]) for t in tasks]


def expected_approvals(tasks) -> int:
    """Ground-truth writes that need a supervisor under the default policy, each judged on
    the order as it is when the write runs (replaying the task's actions on a fresh copy)."""
    count = 0
    for task in tasks:
        data = load_data()
        prices = {item_id: money(v["price"]) for p in data["products"].values() for item_id, v in p["variants"].items()}
        for action in task.actions:
            if action["name"] in REFUND_TOOLS:
                order = order_fact(data["orders"][action["kwargs"]["order_id"]])
                count += required_approval(make_tool_call(action["name"], action["kwargs"]), order,
                                           ApprovalPolicy(), prices) is not None
            run_tool(data, action["name"], action["kwargs"])
    return count


def _task_with_reads_and_outputs() -> dict:
    """A task in the richer τ-bench format: reads, calculate, and expected outputs."""
    data = load_data()
    user_id = "raj_sanchez_2970"
    email = data["users"][user_id]["email"]
    actions = [
        {"name": "find_user_id_by_email", "kwargs": {"email": email}},
        {"name": "get_order_details", "kwargs": {"order_id": "#W7736708"}},
        {"name": "calculate", "kwargs": {"expression": "(100 - 25.5) * 2"}},
        {"name": "cancel_pending_order", "kwargs": {"order_id": "#W4566809", "reason": "ordered by mistake"}},
    ]
    for action in actions:
        run_tool(data, action["name"], action["kwargs"])
    return {"user_id": user_id, "actions": actions, "instruction": "", "outputs": ["149.0"],
            "task_index": 7, "gt_data_hash": data_hash(data)}


def test_cli_runs_a_task_file_with_reads_and_outputs_and_writes_the_json_report(tmp_path):
    task_file = tmp_path / "tasks.json"
    task = _task_with_reads_and_outputs()
    wrong = dict(task, task_index=8, gt_data_hash="0" * 64, outputs=["a figure nobody said"])
    task_file.write_text(json.dumps([task, wrong]))
    env = dict(os.environ, STATEKEEPER_TEMPORAL_ADDRESS=f"127.0.0.1:{free_port()}",
               STATEKEEPER_UI_PORT=str(free_port()), STATEKEEPER_DATA_DIR=str(tmp_path / "data"))
    env.pop("ANTHROPIC_API_KEY", None)
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, "-m", "starter.cli.app", "taubench", "--tasks", str(task_file),
                           "--json", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # one task is meant to fail
    report = json.loads(out.read_text())
    assert set(report["summary"]) == {"total", "passed", "hash_match", "writes", "duplicate_writes", "seconds",
                                      "approvals_granted", "model_calls", "user_messages", "model_calls_per_task",
                                      "model_calls_per_message"}
    summary = report["summary"]
    assert summary["model_calls"] == sum(t["model_calls"] for t in report["tasks"]) > 0
    assert summary["user_messages"] == sum(t["user_messages"] for t in report["tasks"]) >= 2
    assert summary["model_calls_per_message"] == round(summary["model_calls"] / summary["user_messages"], 2)
    assert report["summary"]["total"] == 2 and report["summary"]["passed"] == 1
    good, bad = report["tasks"]
    assert set(good) >= {"task_index", "passed", "hash_match", "outputs_match", "reason", "writes",
                         "duplicate_writes", "seconds"}
    assert good["passed"] and good["outputs_match"] and good["writes"] == 1 and good["duplicate_writes"] == 0
    assert good["approvals_granted"] == 1  # the cancel of 826.70 is above the 500.00 threshold
    assert not bad["passed"] and not bad["hash_match"] and not bad["outputs_match"]
    assert "a figure nobody said" in bad["reason"]
    assert "τ-bench summary" in proc.stdout and "Failed tasks" in proc.stdout and "approvals" in proc.stdout
    assert "model calls / message" in " ".join(proc.stdout.split())
    # the output names the conversations' ids, which `transcript` takes
    said = re.search(r"conversations tb-([0-9a-f]{8})-<task index>, e\.g\. `statekeeper transcript tb-\1-7`",
                     " ".join(proc.stdout.split()))
    assert said, proc.stdout
    shown = subprocess.run([sys.executable, "-m", "starter.cli.app", "transcript", f"tb-{said.group(1)}-7"], cwd=ROOT,
                           env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "[turn 1," in shown.stdout, shown.stdout + shown.stderr


async def test_dev_tasks_on_postgresql(temporal_env, settings, pg_run_url):
    """The same conversations with PostgreSQL as the system of record (row locks, ledger)."""
    pg_settings = settings.model_copy(update={"database_url": pg_run_url})
    tasks = load_tasks(DEV_TASKS)[:8]
    async with running_worker(temporal_env, pg_settings) as (client, backend):
        # 4 at once: each run's first workflow tasks load the fully sandboxed workflow code, and 8 at
        # once beside two other test processes on 2 CPUs passed the 4 s workflow task timeout
        report = await TauBenchRunner(client, backend, run_id=f"pg{os.getpid()}").run(tasks, concurrency=4)
    assert [(t.task_index, t.reason) for t in report.tasks if not t.passed] == []
    assert report.summary.duplicate_writes == 0


# --- With the external services ---

async def test_dev_tasks_match_with_money_in_the_payments_service(temporal_env, settings, services):  # noqa: F811
    tasks = load_tasks(DEV_TASKS)
    async with running_worker(temporal_env, settings, services=services) as (client, backend):
        report = await TauBenchRunner(client, backend, run_id="svc").run(tasks, concurrency=4)
    assert [(t.task_index, t.reason) for t in report.tasks if not t.passed] == []
    assert report.summary.duplicate_writes == 0
    money_writes = [(a["kwargs"]["order_id"], a["name"]) for t in tasks for a in t.actions
                    if a["name"] in CATALOGUE and CATALOGUE[a["name"]].moves_money]
    assert money_writes
    for order_id, _tool in money_writes:
        operations = httpx.get(f"{services['payments']}/operations", params={"reference": order_id}).json()
        assert len(operations) == sum(1 for o, _ in money_writes if o == order_id)
        assert all(op["movements"] for op in operations)


# --- The report tables ---

REFUSAL = ("modify_pending_order_payment: [modify-payment] gift card gift_card_8893815 has 18.00, "
           "not enough to cover the order total of 97.35")


def _report(passed: bool) -> dict:
    task = {"task_index": 24, "passed": passed, "hash_match": passed, "outputs_match": passed,
            "reason": "" if passed else "unmatched: [modify-payment] refused", "policy_refusals": [REFUSAL]}
    return {"tasks": [task], "summary": {"total": 1, "passed": int(passed), "hash_match": int(passed), "writes": 1,
                                         "duplicate_writes": 0, "approvals_granted": 0, "seconds": 1.0}}


def test_the_refusal_table_keeps_the_rule_id(capsys, monkeypatch):
    monkeypatch.setattr(cli.console, "width", 400)
    cli._print_report(_report(True), Settings(), started_server=False)
    assert REFUSAL in capsys.readouterr().out


def test_the_failed_table_keeps_the_reason_as_written(capsys, monkeypatch):
    monkeypatch.setattr(cli.console, "width", 400)
    cli._print_report(_report(False), Settings(), started_server=False)
    assert "unmatched: [modify-payment] refused" in capsys.readouterr().out


def test_the_summary_counts_a_background_listeners_deliveries(capsys, monkeypatch):
    from starter.dev.listener import DrainReport

    monkeypatch.setattr(cli.console, "width", 400)
    cli._print_report(_report(True), Settings(), started_server=False)
    assert "webhook events" not in capsys.readouterr().out  # no listener: no rows
    cli._print_report(_report(True), Settings(), started_server=False,
                      webhooks=DrainReport(delivered=184, verified=183, failed=1, pending=2))
    out = capsys.readouterr().out
    assert re.search(r"webhook events delivered\s*│\s*184", out) and re.search(r"verified by the listener\s*│\s*183", out)
    assert re.search(r"webhook events failed\s*│\s*1 \(2 still pending\)", out)
    assert "bad signature" not in out
