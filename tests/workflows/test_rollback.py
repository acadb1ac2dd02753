"""Rollbacks (a cancel with ``rollback``) whose writes go wrong; what the user is told stays true:

- a cancel that arrives while a write is in flight whose outcome then turns out unknown (also an
  approved write, or one waiting for an operator): the write is escalated (a human must check
  it), and the rollback the cancel asked for still undoes the conversation's reversible writes
  (docs/concepts.md: nothing new starts after a cancel "except those compensations and the
  escalation"); the user's summary says so;
- a compensating write that committed but whose answer was lost on every attempt (the system of
  record went away right after the commit and stayed away for the retries): its outcome is
  unknown, not "could not be undone"; before anyone is told, the ledger is asked by the
  compensation's key (as for any write whose outcome is unknown), and the change it shows
  undone is reported undone;
- a reset that re-runs a rollback whose compensation already applied: the rollback reads the
  subject's document before the compensating write and undoes only what the write set (a later
  change by someone else is never overwritten), so after the reset it finds the address
  already restored; the compensation's key comes from business identity, so the ledger knows it
  applied, and the change is still reported undone (not "not undone", with the step kept
  ``done`` and a human asked to restore an address that was restored).

SupportWorkflow on a real Temporal dev server, a real worker and SQLite; the model is a
scripted brain; faults are injected at the tool port (``tests.port_faults``).
"""

from __future__ import annotations

import asyncio
import uuid

from temporalio.api.enums.v1 import EventType

from tests.policy_fixtures import CUSTOMER, EMAIL, PENDING
from tests.port_faults import FaultyPort
from tests.resets import completed_before, reset_to
from tests.workflow_harness import Script, call, reply, running_worker, until, user_details
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id
from workflows.domain.contracts import CancelRequest
from workflows.domain.state import StepStatus


# --- A write in flight escalated as unknown ---

NEW_ADDRESS = dict(address1="1 New Street", address2="", city="Austin", state="TX", country="USA", zip="78701")


def _script() -> Script:
    """The model: authenticate, change the customer's address, then propose cancelling PENDING
    (the address change's outcome is told by the workflow, without a model call)."""
    return Script([call("find_user_id_by_email", email=EMAIL), reply("Hello Raj, how can I help?"),
                   call("get_user_details", user_id=CUSTOMER),
                   call("modify_user_address", user_id=CUSTOMER, **NEW_ADDRESS),
                   call("get_order_details", order_id=PENDING),
                   call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake")])


async def _address_changed_then_cancel_shown(client, cid: str) -> None:
    """The address change is confirmed and applied; the order's cancel is shown for confirmation."""
    await client.send_message(cid, f"Hi, my email is {EMAIL}")
    assert (await client.send_message(cid, "Change my address to 1 New Street, Austin")).awaiting_confirmation
    assert (await client.send_message(cid, "yes")).text.startswith("Your request is done:")
    assert (await client.send_message(cid, f"Cancel {PENDING}, I ordered it by mistake")).awaiting_confirmation


async def test_a_rollback_cancel_during_a_write_escalated_as_unknown_still_undoes(temporal_env, settings):
    port = FaultyPort()
    port.arm("cancel_pending_order", "http_5xx", count=5)
    script = _script()
    async with running_worker(temporal_env, settings, brain=script, slow_reads=port) as (client, backend):
        before = user_details(backend, CUSTOMER)["address"]
        cid = await client.start_conversation(f"undo-esc-{uuid.uuid4().hex[:6]}")
        await _address_changed_then_cancel_shown(client, cid)
        yes = asyncio.ensure_future(client.send_message(cid, "yes"))
        await until(lambda: (len(port.hits) >= 1), "the write's first failed attempt")
        await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).signal(
            SupportWorkflow.cancel, CancelRequest(reason="the customer changed their mind", rollback=True))
        answer = await asyncio.wait_for(yes, 60)
        assert answer.status == "escalated" and answer.text.startswith("The conversation was cancelled.")
        state = await client.state(cid)
        address_step, cancel_step = state.steps
        assert cancel_step.status == StepStatus.UNKNOWN
        assert user_details(backend, CUSTOMER)["address"] == before, answer.text  # the rollback was asked for
        assert address_step.status == StepStatus.COMPENSATED and "Undone: " in answer.text, answer.text


async def test_a_rollback_cancel_during_an_approved_write_escalated_as_unknown_is_honoured(temporal_env, settings):
    # the same, with the write run outside any turn once a supervisor approved it
    from workflows.domain.policy.approvals import ApprovalPolicy

    port = FaultyPort()
    script = _script()
    async with running_worker(temporal_env, settings, brain=script, slow_reads=port,
                              approvals=ApprovalPolicy()) as (client, backend):
        before = user_details(backend, CUSTOMER)["address"]
        cid = await client.start_conversation(f"undo-apr-{uuid.uuid4().hex[:6]}")
        await _address_changed_then_cancel_shown(client, cid)
        approval_id = (await client.send_message(cid, "yes")).awaiting_approval
        assert approval_id
        port.arm("cancel_pending_order", "http_5xx", count=5)
        await client.decide_approval(approval_id, "approve", "sup-alice", note="checked")
        await until(lambda: (len(port.hits) >= 1), "the approved write's first failed attempt")
        await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).signal(
            SupportWorkflow.cancel, CancelRequest(reason="the customer changed their mind", rollback=True))
        outcome = await asyncio.wait_for(client.outcome(cid), 60)
        state = outcome.state
        assert state.status.value == "escalated"
        assert state.ended_reason.endswith("cancel requested meanwhile: the customer changed their mind"), \
            state.ended_reason
        told = state.recent_turns[-1].text
        assert told.startswith("The conversation was cancelled."), told
        assert user_details(backend, CUSTOMER)["address"] == before, told
        assert state.steps[0].status == StepStatus.COMPENSATED and "Undone: " in told, told


async def test_a_rollback_cancel_while_waiting_for_an_operator_is_honoured(temporal_env, settings):
    # escalated first, waiting for an operator's resolution; then the customer cancels with a rollback
    port = FaultyPort()
    port.arm("cancel_pending_order", "http_5xx", count=5)
    script = _script()
    async with running_worker(temporal_env, settings, brain=script, slow_reads=port) as (client, backend):
        before = user_details(backend, CUSTOMER)["address"]
        cid = await client.start_conversation(f"undo-wait-{uuid.uuid4().hex[:6]}")
        await _address_changed_then_cancel_shown(client, cid)
        assert (await client.send_message(cid, "yes")).status == "escalated"
        await client.cancel(cid, "the customer changed their mind", rollback=True)
        outcome = await asyncio.wait_for(client.outcome(cid), 60)
        state = outcome.state
        told = state.recent_turns[-1].text
        assert state.ended_reason.endswith("cancel requested meanwhile: the customer changed their mind"), \
            state.ended_reason
        assert told.startswith("The conversation was cancelled."), told
        assert user_details(backend, CUSTOMER)["address"] == before, told
        assert "Undone: " in told and "Not known whether it went through" in told, told
        assert state.status.value == "escalated" and state.steps[1].status == StepStatus.UNKNOWN


# --- A compensation whose answer was lost ---

async def test_a_compensation_whose_answer_was_lost_is_reported_as_it_is_in_the_ledger(temporal_env, settings):
    script = Script([call("find_user_id_by_email", email=EMAIL), reply("Hello Raj, how can I help?"),
                     call("get_user_details", user_id=CUSTOMER),
                     call("modify_user_address", user_id=CUSTOMER, **NEW_ADDRESS)])
    port = FaultyPort()
    async with running_worker(temporal_env, settings, brain=script, wrap_port=port.attach) as (client, backend):
        before = user_details(backend, CUSTOMER)["address"]
        cid = await client.start_conversation(f"undo-lost-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert (await client.send_message(cid, "Change my address to 1 New Street, Austin")).awaiting_confirmation
        await client.send_message(cid, "yes")
        assert user_details(backend, CUSTOMER)["address"]["address1"] == "1 New Street"
        # the compensation commits, its answer is lost, and every retry finds the system away
        port.arm("modify_user_address", "commit_then_drop")
        port.arm("modify_user_address", "http_5xx", 4)
        await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).signal(
            SupportWorkflow.cancel, CancelRequest(reason="the customer changed their mind", rollback=True))
        outcome = await asyncio.wait_for(client.outcome(cid), 60)
        assert len(port.hits) == 5
        assert user_details(backend, CUSTOMER)["address"] == before  # the change was undone
        summary = outcome.state.recent_turns[-1].text
        [step] = outcome.state.steps
        assert "Undone: " in summary and "could not be undone" not in summary, summary
        assert step.status == StepStatus.COMPENSATED
        assert backend.tickets("main") == []  # nothing for a human to restore


# --- A reset that re-runs an applied rollback ---

def _signalled_then_read(seen: dict):
    """Marks the first activity scheduled after the cancel signal (the rollback's read)."""
    def marks(event) -> bool:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            seen["signal"] = True
        return bool(seen) and event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    return marks


async def test_a_reset_that_re_runs_an_applied_rollback_reports_the_change_undone(temporal_env, settings):
    script = Script([call("find_user_id_by_email", email=EMAIL), reply("Hello Raj, how can I help?"),
                     call("get_user_details", user_id=CUSTOMER),
                     call("modify_user_address", user_id=CUSTOMER, **NEW_ADDRESS)])
    async with running_worker(temporal_env, settings, brain=script) as (client, backend):
        before = user_details(backend, CUSTOMER)["address"]
        cid = await client.start_conversation(f"reset-undo-{uuid.uuid4().hex[:6]}")
        workflow_id = support_workflow_id(cid)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert (await client.send_message(cid, "Change my address to 1 New Street, Austin")).awaiting_confirmation
        await client.send_message(cid, "yes")
        await temporal_env.client.get_workflow_handle(workflow_id).signal(
            SupportWorkflow.cancel, CancelRequest(reason="the customer changed their mind", rollback=True))
        first = await asyncio.wait_for(client.outcome(cid), 60)
        assert first.state.steps[0].status == StepStatus.COMPENSATED  # the first run undid it
        assert user_details(backend, CUSTOMER)["address"] == before

        point = await completed_before(temporal_env, workflow_id, _signalled_then_read({}), "rollback read")
        await reset_to(temporal_env, workflow_id, point)
        outcome = await asyncio.wait_for(client.outcome(cid), 60)
    assert user_details(backend, CUSTOMER)["address"] == before
    summary = outcome.state.recent_turns[-1].text
    [step] = outcome.state.steps
    assert "Undone: " in summary and "could not be undone" not in summary, summary
    assert step.status == StepStatus.COMPENSATED
    assert backend.tickets("main") == []  # nothing for a human to restore
    assert backend.duplicate_writes("main") == 0
