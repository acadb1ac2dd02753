"""A worker process SIGKILLed inside the compensation of a rollback cancel, after the undo
committed and before its activity completed, then replaced: the rollback finishes on the next
worker, the change is undone exactly once (one ledger row under the undo's key), the step is
``compensated`` and the user is told it was undone, with no ticket for a human to restore it.

SupportWorkflow on a real Temporal dev server, SQLite; the forward write runs on an in-process
worker with a scripted brain, the rollback on a worker process (``tests.fault_worker``) whose
writes pause after they commit, which is killed there."""

from __future__ import annotations

import asyncio
import signal
import uuid

from tests.policy_fixtures import CUSTOMER, EMAIL
from tests.workflow_harness import Script, call, reply, running_worker, user_details
from tests.workflows.test_crash_recovery import _until_polling, _wait_for, _worker_process
from workflows.domain import keys
from workflows.domain.contracts import CancelRequest
from workflows.domain.state import StepStatus
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id

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
