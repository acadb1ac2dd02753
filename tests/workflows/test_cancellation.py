"""Cancelling a conversation, by the cancel signal and by Temporal's own cancellation (the Web
UI's "Request Cancellation") alike:

- while a write awaits its confirmation nothing is written and a later yes is refused; during
  a running write the write that committed is recorded, exactly once;
- by tool class: an in-flight model call or read (one the model proposed or one the state called
  for) is cancelled; a write in flight is awaited and reported; a reversible write is undone
  only when the cancel asks for a rollback, never overwriting a later change by someone else; a
  cancel survives continue-as-new, also one that arrives in the turn after which the run
  continues as new; nothing new starts after it;
- a cancel with ``rollback`` that arrives while a transfer to a human agent opens its ticket:
  the conversation ends transferred (the ticket is open), and the cancel is not lost: its
  rollback undoes the reversible writes and its summary is told.

SupportWorkflow on a real Temporal dev server, a real worker and SQLite; the model is faked at
its boundary by a scripted brain that can take its time (an awaitable brain).
"""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import CancelledError

from activities.retail_port import RetailPort
from starter.client.conversations import ConversationError
from tests.faults import SlowReads
from tests.policy_fixtures import EMAIL, PENDING, CARD, CUSTOMER, DELIVERED
from tests.port_faults import FaultyPort
from tests.workflow_harness import (
    order_details, running_worker, SLOW, Script, call, reply, until, user_details,
)
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id
from workflows.domain import replies
from workflows.domain.contracts import CancelRequest, SupportInput
from workflows.domain.policy.approvals import ApprovalPolicy, ApprovalStatus
from workflows.domain.replies import OPERATOR_CANCEL_REASON
from workflows.domain.state import ConversationState, StepStatus


# --- The cancel signal around a write ---

async def test_cancel_signal_while_awaiting_confirmation_writes_nothing(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        cid = await client.start_conversation(f"cancel-pending-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        r = await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        assert r.awaiting_confirmation
        await client.cancel(cid, "hung up")
        outcome = await asyncio.wait_for(client.outcome(cid), 20)
        assert outcome.status == "cancelled" and outcome.state.pending_confirmation is None
        with pytest.raises(ConversationError) as err:
            await client.send_message(cid, "yes")
        assert err.value.kind == "finished"
        assert order_details(backend, PENDING)["status"] == "pending" and backend.ledger_entries("main") == []


async def test_cancel_signal_during_a_running_write_records_it(temporal_env, settings, tmp_path):
    marker = tmp_path / "committed.marker"
    async with running_worker(temporal_env, settings, pause_after_write=(1.5, marker)) as (client, backend):
        cid = await client.start_conversation(f"cancel-running-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        r = await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        assert r.awaiting_confirmation
        yes = asyncio.create_task(client.send_message(cid, "yes"))
        while not marker.exists():
            await asyncio.sleep(0.05)
        await client.cancel(cid, "hung up mid-write")
        answer = await asyncio.wait_for(yes, 30)
        outcome = await asyncio.wait_for(client.outcome(cid), 30)
        assert outcome.status == "cancelled"
        [op] = outcome.state.completed_operations
        assert op.ok and order_details(backend, PENDING)["status"] == "cancelled"
        assert len(backend.ledger_entries("main")) == 1
        # the reply to the yes says the conversation was cancelled and what completed before it stopped
        assert answer.text.startswith("The conversation was cancelled.")
        assert f"Done: Cancel order {PENDING}" in answer.text


# --- By tool class ---

DEADLINE = 20.0
"""Far below the minute a slow step takes: a reply within it proves the call was cancelled."""

IDENTIFY = [call("find_user_id_by_email", email=EMAIL), reply("Hello Raj, how can I help?")]
NOTEBOOK = "6574183535"  # 28.14 in DELIVERED: a return below any approval rule
NEW_ADDRESS = dict(address1="1 New Street", address2="", city="Austin", state="TX", country="USA", zip="78701")


async def _identified(client, script: Script, name: str) -> str:
    cid = await client.start_conversation(f"{name}-{uuid.uuid4().hex[:6]}")
    await client.send_message(cid, f"Hi, my email is {EMAIL}")
    return cid


async def _state(client, cid: str) -> ConversationState:
    return await client.state(cid)


async def _cancel(how: str, client, env, cid: str) -> None:
    """Cancel ``cid`` by the ``cancel`` signal (``how == "signal"``, reason "the customer hung
    up") or by Temporal's own cancellation (``"temporal"``: the operator's reason)."""
    if how == "signal":
        await client.cancel(cid, "the customer hung up")
    else:
        await env.client.get_workflow_handle(support_workflow_id(cid)).cancel()


@pytest.mark.parametrize("how", ["signal", "temporal"])
async def test_cancel_during_a_model_call_stops_it_and_calls_the_model_no_more(temporal_env, settings, how):
    script = Script([*IDENTIFY, SLOW])
    async with running_worker(temporal_env, settings, brain=script) as (client, backend):
        cid = await _identified(client, script, f"cancel-model-{how}")
        message = asyncio.ensure_future(client.send_message(cid, f"What is the status of {PENDING}?"))
        await until(lambda: (script.calls == 3), "the slow model call")
        await _cancel(how, client, temporal_env, cid)
        answer = await asyncio.wait_for(message, DEADLINE)
        assert answer.status == "cancelled" and answer.text.startswith("The conversation was cancelled.")
        assert "Nothing had been changed." in answer.text
        state = await _state(client, cid)
        assert state.status.value == "cancelled"
        assert state.ended_reason == ("the customer hung up" if how == "signal" else OPERATOR_CANCEL_REASON)
        assert not any(r.rule == "malformed-model-output" for r in state.rejections)
        handle = temporal_env.client.get_workflow_handle_for(SupportWorkflow.run, support_workflow_id(cid))
        if how == "temporal":
            with pytest.raises(WorkflowFailureError) as err:
                await handle.result()
            assert isinstance(err.value.cause, CancelledError)
            assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
        else:
            assert (await handle.result()).status == "cancelled"
        await until(lambda: (script.cancelled == 1), "the model call's cancellation")
        assert script.calls == 3 and backend.ledger_entries("main") == []


@pytest.mark.parametrize("how", ["signal", "temporal"])
@pytest.mark.parametrize("proposer", ["model", "state"])
async def test_cancel_during_a_read_stops_it(temporal_env, settings, how, proposer):
    # "model": the message does not name the order, the model proposes its read; "state": the
    # message names it, and the workflow reads it before asking the model (a state-driven read)
    script = Script([*IDENTIFY, call("get_order_details", order_id=PENDING)])
    slow = SlowReads(30.0, frozenset({"get_order_details"}))
    asked = "What is the status of my pending order?" if proposer == "model" else f"What is the status of {PENDING}?"
    async with running_worker(temporal_env, settings, brain=script, slow_reads=slow) as (client, backend):
        cid = await _identified(client, script, f"cancel-read-{proposer}-{how}")
        message = asyncio.ensure_future(client.send_message(cid, asked))
        await until(lambda: (slow.started == 1), "the slow read")
        await _cancel(how, client, temporal_env, cid)
        # a read is a local activity: the cancel reaches the workflow when its task heartbeats or
        # the read's 3 s attempt ends (docs/concepts.md, "Interrupts and cancellation"), not after 30 s
        answer = await asyncio.wait_for(message, DEADLINE)
        assert answer.status == "cancelled" and "Nothing had been changed." in answer.text
        state = await _state(client, cid)
        assert state.status.value == "cancelled" and state.steps == []
        assert state.ended_reason == ("the customer hung up" if how == "signal" else OPERATOR_CANCEL_REASON)
        # its result unused; no model call after it (the two of the first turn, and the one that proposed it)
        assert PENDING not in state.orders and script.calls == (3 if proposer == "model" else 2)
        assert backend.ledger_entries("main") == []


@pytest.mark.parametrize("how", ["signal", "temporal"])
async def test_cancel_during_an_irreversible_write_awaits_it_and_reports_it(temporal_env, settings, tmp_path, how):
    # a cancel of #W4566809 (826.70, above the default 500.00) waits for a supervisor; then the
    # return of one notebook (28.14) runs, and the cancel arrives while it is in flight
    marker = tmp_path / "committed.marker"
    script = Script([*IDENTIFY, call("get_order_details", order_id=PENDING),
                     call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake"),
                     call("get_user_details", user_id=CUSTOMER), call("get_order_details", order_id=DELIVERED),
                     call("return_delivered_order_items", order_id=DELIVERED, item_ids=[NOTEBOOK],
                          payment_method_id=CARD)])
    async with running_worker(temporal_env, settings, brain=script, pause_after_write=(2.0, marker),
                              approvals=ApprovalPolicy()) as (client, backend):
        cid = await _identified(client, script, f"cancel-write-{how}")
        assert (await client.send_message(cid, f"Cancel {PENDING}, I ordered it by mistake")).awaiting_confirmation
        assert (await client.send_message(cid, "yes")).awaiting_approval
        shown = await client.send_message(cid, f"Also return the notebook from {DELIVERED}")
        assert shown.awaiting_confirmation
        calls_before = script.calls
        yes = asyncio.ensure_future(client.send_message(cid, "yes"))
        await until(lambda: (marker.exists()), "the write's commit")
        await _cancel(how, client, temporal_env, cid)
        answer = await asyncio.wait_for(yes, DEADLINE)
        reason = "the customer hung up" if how == "signal" else OPERATOR_CANCEL_REASON
        assert answer.status == "cancelled" and f"Done: Return from order {DELIVERED}" in answer.text
        assert f'Not done: "Cancel order {PENDING}' in answer.text
        state = await _state(client, cid)
        [op] = state.completed_operations
        assert op.ok and op.tool == "return_delivered_order_items"
        cancel_step, return_step = state.steps
        assert (return_step.status, return_step.error) == (StepStatus.DONE, None)  # awaited: completed once
        assert (cancel_step.status, cancel_step.error) == (StepStatus.CANCELLED, reason)  # the remaining step
        assert [a.status for a in state.approvals] == [ApprovalStatus.WITHDRAWN]
        assert state.ended_reason == reason and state.recent_turns[-1].text == answer.text
        assert order_details(backend, DELIVERED)["status"] == "return requested"
        assert order_details(backend, PENDING)["status"] == "pending"
        assert [e["tool"] for e in backend.ledger_entries("main")] == ["return_delivered_order_items"]
        assert script.calls == calls_before  # nothing new started: no model call after the write


async def test_a_write_in_flight_whose_outcome_is_unknown_is_still_escalated_after_a_cancel(temporal_env, settings):
    # the retail system fails every attempt of the cancel (5, the write's retry policy): the
    # outcome is unknown, so the one thing a cancel still lets start is its escalation ticket
    port = FaultyPort()
    port.arm("cancel_pending_order", "http_5xx", count=5)
    script = Script([*IDENTIFY, call("get_order_details", order_id=PENDING),
                     call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake")])
    async with running_worker(temporal_env, settings, brain=script, slow_reads=port) as (client, backend):
        cid = await _identified(client, script, "cancel-unknown")
        assert (await client.send_message(cid, f"Cancel {PENDING}, I ordered it by mistake")).awaiting_confirmation
        calls_before = script.calls
        yes = asyncio.ensure_future(client.send_message(cid, "yes"))
        await until(lambda: (len(port.hits) >= 1), "the write's first failed attempt")
        await client.cancel(cid, "the customer hung up")
        answer = await asyncio.wait_for(yes, DEADLINE)
        # escalated (a human must check the write), and the user hears of the cancel too
        assert answer.status == "escalated" and answer.text.startswith("The conversation was cancelled.")
        assert f'Not known whether it went through (a human agent is checking): "Cancel order {PENDING}' in answer.text
        assert answer.text.endswith(replies.escalated([], ticket_opened=True))
        state = await _state(client, cid)
        [step] = state.steps
        assert step.status == StepStatus.UNKNOWN and state.status.value == "escalated"
        assert state.ended_reason.endswith("escalated to a human agent; cancel requested meanwhile: the customer hung up")
        assert state.recent_turns[-1].text == answer.text
        [ticket] = backend.tickets("main")
        assert ticket["ticket_key"] == f"escalate:cancel_pending_order:{PENDING}:{cid}.t2"
        assert len(port.hits) == 5 and backend.ledger_entries("main") == []
        assert order_details(backend, PENDING)["status"] == "pending"
        assert script.calls == calls_before  # no model call, no read, no other write or ticket


@pytest.mark.parametrize("rollback", [True, False])
async def test_cancel_after_a_reversible_write_undoes_it_only_on_rollback(temporal_env, settings, rollback):
    script = Script([*IDENTIFY, call("get_user_details", user_id=CUSTOMER),
                     call("modify_user_address", user_id=CUSTOMER, **NEW_ADDRESS)])
    async with running_worker(temporal_env, settings, brain=script) as (client, backend):
        before = user_details(backend, CUSTOMER)["address"]
        cid = await _identified(client, script, f"cancel-undo-{rollback}")
        shown = await client.send_message(cid, "Please change my default address to 1 New Street, Austin TX 78701")
        assert shown.awaiting_confirmation
        await client.send_message(cid, "yes")
        assert user_details(backend, CUSTOMER)["address"]["address1"] == "1 New Street"
        await _signal_cancel(temporal_env, cid, CancelRequest(reason="the customer changed their mind",
                                                              rollback=rollback))
        outcome = await asyncio.wait_for(client.outcome(cid), DEADLINE)
        [step] = outcome.state.steps
        summary = outcome.state.recent_turns[-1].text
        if rollback:
            assert user_details(backend, CUSTOMER)["address"] == before
            assert step.status == StepStatus.COMPENSATED and summary.startswith("The conversation was cancelled.")
            assert "Undone: " in summary and len(backend.ledger_entries("main")) == 2
        else:
            assert user_details(backend, CUSTOMER)["address"]["address1"] == "1 New Street"
            assert step.status == StepStatus.DONE and "Done: " in summary
            assert len(backend.ledger_entries("main")) == 1


async def test_a_cancel_survives_continue_as_new(temporal_env, settings):
    script = Script([*IDENTIFY, SLOW])
    async with running_worker(temporal_env, settings, brain=script) as (client, backend):
        cid = f"cancel-can-{uuid.uuid4().hex[:6]}"
        handle = await temporal_env.client.start_workflow(
            SupportWorkflow.run, SupportInput(conversation_id=cid, max_turns_per_run=1),
            id=support_workflow_id(cid), task_queue=settings.task_queue)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")  # this turn continues as new
        message = asyncio.ensure_future(client.send_message(cid, f"What is the status of {PENDING}?"))
        await until(lambda: (script.calls == 3), "the slow model call in the next run")
        await client.cancel(cid, "the customer hung up")
        answer = await asyncio.wait_for(message, DEADLINE)
        assert answer.status == "cancelled"
        latest = temporal_env.client.get_workflow_handle_for(SupportWorkflow.run, support_workflow_id(cid))
        assert (await latest.result()).status == "cancelled"
        assert (await latest.describe()).run_id != handle.first_execution_run_id


@pytest.mark.parametrize("how", ["signal", "temporal"])
async def test_a_cancel_during_the_turn_that_continues_as_new_stays_cancelled(temporal_env, settings, how):
    # a cancel arriving while the model thinks in the turn after which the run would continue as
    # new (here the first: max_turns_per_run=1) is kept: the next run does not go on answering
    script = Script([call("find_user_id_by_email", email=EMAIL), SLOW])
    async with running_worker(temporal_env, settings, brain=script) as (client, backend):
        cid = f"cancel-at-can-{how}-{uuid.uuid4().hex[:6]}"
        first = await temporal_env.client.start_workflow(
            SupportWorkflow.run, SupportInput(conversation_id=cid, max_turns_per_run=1),
            id=support_workflow_id(cid), task_queue=settings.task_queue)
        message = asyncio.ensure_future(client.send_message(cid, f"Hi, my email is {EMAIL}"))
        await until(lambda: (script.calls == 2), "the slow model call of the last turn of the run")
        await _cancel(how, client, temporal_env, cid)
        answer = await asyncio.wait_for(message, DEADLINE)
        assert answer.status == "cancelled" and "Nothing had been changed." in answer.text
        latest = temporal_env.client.get_workflow_handle_for(SupportWorkflow.run, support_workflow_id(cid))
        description = await latest.describe()
        assert description.run_id == first.first_execution_run_id  # no next run was started
        if how == "temporal":
            assert description.status == WorkflowExecutionStatus.CANCELED
        else:
            assert (await latest.result()).status == "cancelled"
            assert description.status == WorkflowExecutionStatus.COMPLETED
        with pytest.raises(ConversationError) as refused:
            await client.send_message(cid, "are you still there?")
        assert refused.value.kind == "finished"
        state = await _state(client, cid)
        assert state.status.value == "cancelled" and state.customer is not None and state.turn == 1
        await until(lambda: (script.cancelled == 1), "the model call's cancellation")
        assert script.calls == 2 and backend.ledger_entries("main") == []


async def test_a_cancel_carried_into_the_next_run_is_honoured_before_any_message(temporal_env, settings):
    # what continue-as-new hands over when the cancel arrived while the handlers finished
    script = Script([])
    async with running_worker(temporal_env, settings, brain=script) as (client, backend):
        cid = f"cancel-carried-{uuid.uuid4().hex[:6]}"
        carried = SupportInput(conversation_id=cid, state=ConversationState(conversation_id=cid, turn=3),
                               cancel=CancelRequest(reason="cancelled before the run continued"))
        handle = await temporal_env.client.start_workflow(SupportWorkflow.run, carried, id=support_workflow_id(cid),
                                                          task_queue=settings.task_queue)
        outcome = await asyncio.wait_for(handle.result(), DEADLINE)
        assert outcome.status == "cancelled" and outcome.state.ended_reason == "cancelled before the run continued"
        assert script.calls == 0


async def _signal_cancel(env, cid: str, request: CancelRequest) -> None:
    await env.client.get_workflow_handle(support_workflow_id(cid)).signal(SupportWorkflow.cancel, request)


async def test_a_rollback_never_overwrites_a_later_change_by_someone_else(temporal_env, settings):
    script = Script([*IDENTIFY, call("get_user_details", user_id=CUSTOMER),
                     call("modify_user_address", user_id=CUSTOMER, **NEW_ADDRESS)])
    async with running_worker(temporal_env, settings, brain=script) as (client, backend):
        cid = await _identified(client, script, "cancel-undo-later")
        assert (await client.send_message(cid, "Change my address to 1 New Street, Austin")).awaiting_confirmation
        await client.send_message(cid, "yes")
        later = {**NEW_ADDRESS, "address1": "2 Later Road"}  # another agent changes it afterwards
        backend.invoke("main", "modify_user_address", {"user_id": CUSTOMER, **later}, idempotency_key="agent-x")
        await _signal_cancel(temporal_env, cid, CancelRequest(reason="the customer changed their mind",
                                                              rollback=True))
        outcome = await asyncio.wait_for(client.outcome(cid), DEADLINE)
        assert user_details(backend, CUSTOMER)["address"]["address1"] == "2 Later Road"
        [step] = outcome.state.steps
        assert step.status == StepStatus.DONE
        summary = outcome.state.recent_turns[-1].text
        assert "could not be undone" in summary and "Undone:" not in summary
        [ticket] = backend.tickets("main")
        assert "could not undo" in ticket["summary"]


# --- During a transfer ---

async def test_a_rollback_cancel_during_a_transfer_is_not_lost(temporal_env, settings, monkeypatch):
    opening, release = threading.Event(), threading.Event()
    original = RetailPort.open_ticket

    def slow_open(self, *args, **kwargs):
        opening.set()
        release.wait(20)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(RetailPort, "open_ticket", slow_open)
    script = Script([call("find_user_id_by_email", email=EMAIL), reply("Hello Raj, how can I help?"),
                     call("get_user_details", user_id=CUSTOMER),
                     call("modify_user_address", user_id=CUSTOMER, **NEW_ADDRESS),
                     {"kind": "transfer_to_human", "summary": "the customer wants a person"}])
    async with running_worker(temporal_env, settings, brain=script) as (client, backend):
        before = user_details(backend, CUSTOMER)["address"]
        cid = await client.start_conversation(f"xfer-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert (await client.send_message(cid, "Change my address to 1 New Street, Austin")).awaiting_confirmation
        # the workflow tells the write's outcome itself: the model's next proposal is the transfer
        assert (await client.send_message(cid, "yes")).text.startswith("Your request is done:")
        message = asyncio.ensure_future(client.send_message(cid, "Let me talk to a person"))
        await until(opening.is_set, "the transfer's ticket")
        await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).signal(
            SupportWorkflow.cancel, CancelRequest(reason="the customer hung up", rollback=True))
        await asyncio.sleep(1.0)
        release.set()
        answer = await asyncio.wait_for(message, 30)
        outcome = await asyncio.wait_for(client.outcome(cid), 30)
        assert outcome.status == "transferred" and len(backend.tickets("main")) == 1  # the ticket was opened
        assert answer.text.startswith("The conversation was cancelled. Undone: "), answer.text
        assert answer.text.endswith(replies.TRANSFERRED), answer.text
        assert outcome.state.ended_reason == "transferred to a human agent; cancel requested meanwhile: " \
                                            "the customer hung up"
        assert user_details(backend, CUSTOMER)["address"] == before, answer.text
        assert outcome.state.recent_turns[-1].text == answer.text
