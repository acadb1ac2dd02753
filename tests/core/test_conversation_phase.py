"""The conversation's phase (``workflows.domain.records.Phase``): one value in the state, set by
the transitions alone, through a conversation's life: open, awaiting the user's yes, awaiting
a supervisor, closing under a cancel, awaiting an operator's resolution, closed."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from tests.policy_fixtures import PENDING, authenticated
from workflows.conversation.resolution import ResolveOutcome, apply_resolution
from workflows.domain import keys
from workflows.domain import transitions as tr
from workflows.domain.actions import make_tool_call
from workflows.domain.policy.approvals import Approval, ApprovalDecision
from workflows.domain.records import Phase
from workflows.domain.state import ConversationState, ConversationStatus, PendingConfirmation

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def show(state: ConversationState) -> PendingConfirmation:
    call = make_tool_call("cancel_pending_order", {"order_id": PENDING, "reason": "no longer needed"})
    return tr.await_confirmation(state, keys.operation_id(state.conversation_id, state.turn), call, "Cancel it")


def park(state: ConversationState) -> Approval:
    """Show a write, take the user's yes and park it for a supervisor."""
    show(state)
    tr.receive_user_message(state, "yes")
    confirmed = tr.take_pending(state)
    approval = Approval(approval_id=f"a-{confirmed.operation_id}", workflow_id="support-policy-test",
                        operation_id=confirmed.operation_id, digest="d", tool=confirmed.call.name, order_id=PENDING,
                        amount=Decimal("10.00"), reasons=[], requested_at=T0, expires_at=T0 + timedelta(hours=1))
    tr.await_approval(state, confirmed, approval)
    return approval


def test_a_write_shown_then_answered_moves_the_phase_and_back():
    state = authenticated()
    assert state.phase is Phase.OPEN and state.is_open()
    show(state)
    assert state.phase is Phase.AWAITING_CONFIRMATION
    tr.receive_user_message(state, "no")
    tr.take_pending(state)
    assert state.phase is Phase.OPEN


def test_an_approval_is_what_the_phase_says_while_another_write_is_shown():
    state = authenticated()
    approval = park(state)
    assert state.phase is Phase.AWAITING_APPROVAL
    show(state)  # the user asks for another change meanwhile
    assert state.phase is Phase.AWAITING_APPROVAL and state.pending_confirmation is not None
    tr.decide_approval(state, approval, ApprovalDecision(approval_id=approval.approval_id, decision="approve",
                                                         approver="alice"), T0)
    assert state.phase is Phase.AWAITING_CONFIRMATION  # the shown write is what waits now


def test_an_expired_approval_leaves_the_phase():
    state = authenticated()
    approval = park(state)
    tr.expire_approvals(state, approval.expires_at - timedelta(seconds=1))
    assert state.phase is Phase.AWAITING_APPROVAL
    tr.expire_approvals(state, approval.expires_at)
    assert state.phase is Phase.OPEN


@pytest.mark.parametrize("before", ["open", "shown", "approval"])
def test_a_cancel_makes_a_serving_conversation_closing_then_closed(before):
    state = authenticated()
    {"open": lambda: None, "shown": lambda: show(state), "approval": lambda: park(state)}[before]()
    tr.request_cancel(state)
    assert state.phase is Phase.CLOSING and state.is_open() and not state.phase.serving
    tr.request_cancel(state)  # a second cancel changes nothing
    assert state.phase is Phase.CLOSING
    tr.close(state, ConversationStatus.CANCELLED, "the user cancelled")
    assert state.phase is Phase.CLOSED and not state.is_open()
    tr.request_cancel(state)
    assert state.phase is Phase.CLOSED


def escalated() -> tuple[ConversationState, PendingConfirmation]:
    state = authenticated()
    pending = show(state)
    tr.receive_user_message(state, "yes")
    tr.take_pending(state)
    tr.start_write(state, pending)
    tr.outcome_unknown(state, pending, "could not be shown to have completed")
    tr.escalate(state, pending, "could not be shown to have completed")
    return state, pending


def test_an_escalation_waits_for_an_operator_and_a_resolution_reopens_it():
    state, pending = escalated()
    assert state.phase is Phase.CLOSED and state.status is ConversationStatus.ESCALATED
    assert tr.await_resolution(state) and state.phase is Phase.AWAITING_RESOLUTION and not state.is_open()
    step = next(s for s in state.steps if s.step_id == pending.operation_id)
    apply_resolution(state, step, ResolveOutcome(step_id=step.step_id, outcome="applied", operator="olga",
                                                 note="checked the ledger"), T0)
    assert state.phase is Phase.OPEN and state.status is ConversationStatus.ACTIVE


def test_a_wait_for_an_operator_ends_closed_when_it_runs_out_or_a_cancel_comes():
    state, _ = escalated()
    assert tr.await_resolution(state)
    tr.stop_awaiting_resolution(state)
    assert state.phase is Phase.CLOSED and state.status is ConversationStatus.ESCALATED
    state, _ = escalated()
    assert tr.await_resolution(state)
    tr.request_cancel(state)  # it stays escalated: a human checks the write
    assert state.phase is Phase.CLOSED and state.status is ConversationStatus.ESCALATED


def test_only_an_escalation_with_an_unknown_step_waits_for_an_operator():
    state = authenticated()
    assert not tr.await_resolution(state) and state.phase is Phase.OPEN
    tr.close(state, ConversationStatus.TRANSFERRED, "transferred to a human agent")
    assert not tr.await_resolution(state) and state.phase is Phase.CLOSED


def test_each_phase_says_whether_the_conversation_serves_and_is_active():
    assert {p for p in Phase if p.serving} == {Phase.OPEN, Phase.AWAITING_CONFIRMATION, Phase.AWAITING_APPROVAL}
    assert {p for p in Phase if p.active} == {Phase.OPEN, Phase.AWAITING_CONFIRMATION, Phase.AWAITING_APPROVAL,
                                              Phase.CLOSING}


def test_the_operators_step_reads_the_phase():
    """``Step`` (search attribute and details): awaiting a supervisor or the user as the phase
    says, else the write running, else the status."""
    from workflows.visibility import business_step

    state = authenticated()
    assert business_step(state) == "active"
    show(state)
    assert business_step(state) == "awaiting_confirmation"
    tr.receive_user_message(state, "no")
    tr.take_pending(state)
    park(state)
    show(state)
    assert business_step(state) == "awaiting_approval"
    tr.close(state, ConversationStatus.TRANSFERRED, "transferred to a human agent")
    assert business_step(state) == "transferred"


def test_the_view_says_what_the_step_begun_by_an_event_is_doing():
    from workflows.visibility import doing

    assert doing(tr.ModelAsked(turn=3)) == "model proposing the next action"
    assert doing(tr.ReplyAccepted()) is None
