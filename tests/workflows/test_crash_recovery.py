"""A worker process killed, then restarted or replaced:

- with SIGKILL inside a write activity, after the database commit and before the activity
  completes: the task still passes and the write was applied exactly once (the retry finds its
  idempotency key in the ledger); with SIGTERM during a write, the worker stops and the next
  one applies it once;
- during a model call (noticed by its heartbeat, or at the workflow task timeout when model
  calls are local activities) or a read: replaced, and the turn answered once;
- with SIGKILL inside the compensation of a rollback cancel, after the undo committed: the
  rollback finishes on the next worker, the change is undone exactly once (one ledger row under
  the undo's key), the step is ``compensated`` and the user is told it was undone, with no
  ticket for a human to restore it.
  The forward write runs on an in-process worker with a scripted brain, the rollback on a
  worker process (``tests.fault_worker``) whose writes pause after they commit, which is killed
  there.

A real Temporal dev server, SQLite.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from starter.client.conversations import StatekeeperClient
from starter.client.core import Deadlines
from starter.ops.taubench import TauBenchRunner, load_tasks
from starter.runtime.worker import build_backend
from tests.policy_fixtures import CUSTOMER, EMAIL
from tests.workflow_harness import Script, call, reply, running_worker, user_details
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id
from workflows.domain import keys
from workflows.domain.contracts import CancelRequest
from workflows.domain.state import StepStatus


ROOT = Path(__file__).resolve().parents[2]


def _worker_process(env, settings, tmp_path: Path, fault: bool) -> subprocess.Popen:
    # the faulty worker is a test worker (tests/fault_worker.py): its tool port pauses after a commit
    fault_args = ["pause-after-write", "600", str(tmp_path / "committed.marker")] if fault else None
    return _spawn_worker(env, settings, tmp_path, fault_args, "worker-fault.log" if fault else "starter.runtime.worker.log")


def _spawn_worker(env, settings, tmp_path: Path, fault_args: list[str] | None, log_name: str) -> subprocess.Popen:
    """A worker process on the test's server, queue and database: ``worker.py``, or the test
    worker ``tests.fault_worker`` with ``fault_args``."""
    environment = dict(os.environ)
    environment.update({
        "STATEKEEPER_TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
        "STATEKEEPER_TASK_QUEUE": settings.task_queue,
        "STATEKEEPER_DATABASE_URL": settings.database_url,
        "STATEKEEPER_DATA_DIR": str(tmp_path),
    })
    environment.pop("ANTHROPIC_API_KEY", None)
    command = ([sys.executable, "-m", "tests.fault_worker", *fault_args] if fault_args
               else [sys.executable, str(ROOT / "worker.py")])
    log = open(tmp_path / log_name, "ab")
    return subprocess.Popen(command, cwd=ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT)


async def _until_polling(env, settings, timeout: float = 60.0) -> None:
    """Until a worker polls the task queue: a spawned worker process takes a few seconds to
    start (more on a loaded machine), and the client starts nothing before one polls."""
    client = StatekeeperClient(env.client, settings.task_queue)
    deadline = time.monotonic() + timeout
    while not await client.worker_polling():
        assert time.monotonic() < deadline, "the spawned worker never polled the task queue"
        await asyncio.sleep(0.2)


async def _wait_for(path: Path, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        await asyncio.sleep(0.1)
    return path.read_text()


async def test_sigkill_after_commit_then_restart_applies_the_write_once(temporal_env, settings, tmp_path):
    task = load_tasks(ROOT / "systems" / "retail" / "data" / "tasks_dev.json")[0]
    assert [a["name"] for a in task.actions] == ["cancel_pending_order"]
    backend = build_backend(settings)
    # A SIGKILL can land while the killed worker holds one of the conversation's workflow
    # tasks (e.g. an update's, sent as the write commits): queries then wait for that task to
    # time out (10 s) before the new worker answers, so the runner's RPCs get more than that.
    runner = TauBenchRunner(StatekeeperClient(temporal_env.client, settings.task_queue, write_timeout_seconds=3.0,
                                              deadlines=Deadlines(rpc_seconds=30.0)),
                            backend, run_id="crash", keep_stores=True)
    first = _worker_process(temporal_env, settings, tmp_path, fault=True)
    second = None
    try:
        await _until_polling(temporal_env, settings)
        run = asyncio.create_task(runner.run_task(task))
        key = await _wait_for(tmp_path / "committed.marker", 60)
        assert key.startswith("cancel_pending_order:#W5442520:")
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        store = f"tb-crash-{task.task_index}"
        [entry] = backend.ledger_entries(store)  # committed before the kill
        assert entry["idempotency_key"] == key
        second = _worker_process(temporal_env, settings, tmp_path, fault=False)
        result = await asyncio.wait_for(run, 120)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert result.passed and result.hash_match, result.reason
    assert result.writes == 1 and result.duplicate_writes == 0
    [entry] = backend.ledger_entries(store)
    assert entry["idempotency_key"] == key
    order = json.loads(backend.read(store, "get_order_details", {"order_id": "#W5442520"}))
    refunds = [p for p in order["payment_history"] if p["transaction_type"] == "refund"]
    assert order["status"] == "cancelled" and len(refunds) == 1


async def _killed_mid_turn(env, settings, tmp_path: Path, hang: str, cid: str, text: str,
                          local_model_calls: bool = False):
    """Send ``text`` to a new conversation on a worker that hangs at ``hang`` (``hang-model``,
    ``hang-read``), SIGKILL it there, start a healthy worker; returns (the reply, the state, the
    conversation's history)."""
    from tests.workflow_harness import NO_APPROVALS, running_worker

    marker = tmp_path / f"{hang}.marker"
    hanging = _spawn_worker(env, settings, tmp_path, [hang, str(marker)], f"worker-{hang}.log")
    try:
        await _until_polling(env, settings)
        client = StatekeeperClient(env.client, settings.task_queue, approvals=NO_APPROVALS,
                                   local_model_calls=local_model_calls)
        cid = await client.start_conversation(cid)
        reply = asyncio.create_task(client.send_message(cid, text))
        await _wait_for(marker, 60)
        hanging.send_signal(signal.SIGKILL)
        hanging.wait(10)
        async with running_worker(env, settings):
            answer = await asyncio.wait_for(reply, 120)
            state = await client.state(cid)
    finally:
        if hanging.poll() is None:
            hanging.kill()
            hanging.wait(10)
    return answer, state, await env.client.get_workflow_handle(f"support-{cid}").fetch_history()


async def test_worker_killed_during_a_model_call_is_noticed_by_heartbeat(temporal_env, settings, tmp_path):
    """The model activity heartbeats while it waits: a SIGKILLed worker is noticed at the
    heartbeat timeout, not the 60 s start-to-close timeout, and the next attempt (on a
    healthy worker) answers the user. Checked from history: the retried attempt's last
    failure is a heartbeat timeout."""
    from temporalio.api.enums.v1 import EventType, TimeoutType

    answer, _, history = await _killed_mid_turn(temporal_env, settings, tmp_path, "hang-model", "model-kill",
                                                "Hi, my email is raj.sanchez2046@example.com")
    assert answer.status == "active" and answer.text
    started = [e.activity_task_started_event_attributes for e in history.events
               if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
               and e.activity_task_started_event_attributes.attempt > 1]
    assert started, "the model call was not retried"
    assert started[0].last_failure.timeout_failure_info.timeout_type == TimeoutType.TIMEOUT_TYPE_HEARTBEAT


async def test_worker_killed_during_a_model_call_is_noticed_at_the_workflow_task_timeout(temporal_env, settings,
                                                                                        tmp_path):
    """With model calls as local activities (``SupportInput.local_model_calls``) the SDK
    heartbeats the workflow task that runs one, so a SIGKILLed worker is noticed when that task
    times out (4 s), not at the model call's 60 s start-to-close timeout, and the next worker
    makes the call again and answers the user once. Checked from history: a workflow task timed
    out (start-to-close) and no model call ran as an activity."""
    from temporalio.api.enums.v1 import EventType, TimeoutType

    from workflows.domain.state import Role

    answer, state, history = await _killed_mid_turn(temporal_env, settings, tmp_path, "hang-model", "model-kill-local",
                                                    "Hi, my email is raj.sanchez2046@example.com", local_model_calls=True)
    assert answer.status == "active" and answer.text
    assert [t.turn for t in state.recent_turns if t.role is Role.ASSISTANT] == [1]  # one reply
    timed_out = [e.workflow_task_timed_out_event_attributes.timeout_type for e in history.events
                 if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT]
    assert TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE in timed_out
    assert not [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                and e.activity_task_scheduled_event_attributes.activity_type.name == "propose_action"]


async def test_worker_killed_during_a_read_is_replaced_and_the_turn_answered_once(temporal_env, settings, tmp_path):
    """Reads run as local activities inside a workflow task: a worker SIGKILLed in the middle
    of one is noticed at the conversation's workflow task timeout, the next worker runs the
    read again (a read changes nothing) and the message gets one reply."""
    from temporalio.api.enums.v1 import EventType

    from tests.policy_fixtures import EMAIL, PENDING
    from workflows.domain.state import Role

    answer, state, history = await _killed_mid_turn(temporal_env, settings, tmp_path, "hang-read", "read-kill",
                                                    f"Hi, my email is {EMAIL}. Where is order {PENDING}?")
    assert answer.status == "active" and answer.text
    assert PENDING in state.orders  # the read ran on the new worker and was folded
    assert [t.turn for t in state.recent_turns if t.role is Role.ASSISTANT] == [1]  # one reply
    assert any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT for e in history.events)


async def test_sigterm_during_a_write_stops_the_worker_and_the_next_one_applies_it_once(temporal_env, settings,
                                                                                       tmp_path):
    """A worker asked to stop (SIGTERM) while a write's database thread is busy does not hang:
    running activities get the graceful-shutdown time, then the process exits without joining
    that thread. The write had committed; the next worker's retry finds its idempotency key."""
    task = load_tasks(ROOT / "systems" / "retail" / "data" / "tasks_dev.json")[0]
    backend = build_backend(settings)
    runner = TauBenchRunner(StatekeeperClient(temporal_env.client, settings.task_queue, write_timeout_seconds=30.0,
                                              deadlines=Deadlines(rpc_seconds=30.0)),
                            backend, run_id="sigterm", keep_stores=True)
    first = _worker_process(temporal_env, settings, tmp_path, fault=True)  # its write thread sleeps 600 s
    second = None
    try:
        await _until_polling(temporal_env, settings)
        run = asyncio.create_task(runner.run_task(task))
        key = await _wait_for(tmp_path / "committed.marker", 60)
        first.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(first.wait, 60)  # graceful shutdown (10 s) and exit; not 600 s
        assert code == 0
        second = _worker_process(temporal_env, settings, tmp_path, fault=False)
        result = await asyncio.wait_for(run, 120)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert result.passed and result.writes == 1 and result.duplicate_writes == 0, result.reason
    [entry] = backend.ledger_entries(f"tb-sigterm-{task.task_index}")
    assert entry["idempotency_key"] == key


# --- Inside a rollback's compensation ---

NEW_ADDRESS = dict(address1="1 New Street", address2="", city="Austin", state="TX", country="USA", zip="78701")


async def test_sigkill_after_the_undo_commits_undoes_the_change_once(temporal_env, settings, tmp_path):
    script = Script([call("find_user_id_by_email", email=EMAIL), reply("Hello Raj, how can I help?"),
                     call("get_user_details", user_id=CUSTOMER),
                     call("modify_user_address", user_id=CUSTOMER, **NEW_ADDRESS), reply("Your address is changed.")])
    cid = f"kill-undo-{uuid.uuid4().hex[:6]}"
    async with running_worker(temporal_env, settings, brain=script) as (client, backend):
        before = user_details(backend, CUSTOMER)["address"]
        await client.start_conversation(cid)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert (await client.send_message(cid, "Change my address to 1 New Street, Austin")).awaiting_confirmation
        await client.send_message(cid, "yes")
    assert user_details(backend, CUSTOMER)["address"]["address1"] == "1 New Street"

    killed = _worker_process(temporal_env, settings, tmp_path, fault=True)  # its writes pause 600 s after commit
    try:
        await _until_polling(temporal_env, settings)
        await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).signal(
            SupportWorkflow.cancel, CancelRequest(reason="the customer changed their mind", rollback=True))
        key = await _wait_for(tmp_path / "committed.marker", 60)
        assert key.startswith("modify_user_address:") and key.endswith(".undo"), key
        killed.send_signal(signal.SIGKILL)
        killed.wait(10)
        assert user_details(backend, CUSTOMER)["address"] == before  # the undo committed before the kill
        async with running_worker(temporal_env, settings) as (client, _):
            outcome = await asyncio.wait_for(client.outcome(cid), 120)
    finally:
        if killed.poll() is None:
            killed.kill()
            killed.wait(10)
    assert user_details(backend, CUSTOMER)["address"] == before
    [step] = outcome.state.steps
    assert step.status == StepStatus.COMPENSATED
    summary = outcome.state.recent_turns[-1].text
    assert "Undone: " in summary and "could not be undone" not in summary, summary
    undo = keys.compensation_operation(step.operation_id)
    assert [e["idempotency_key"] for e in backend.ledger_entries("main") if e["idempotency_key"].endswith(undo)] == [key]
    assert backend.tickets("main") == [] and backend.duplicate_writes("main") == 0
