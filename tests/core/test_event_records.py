"""Which public events the journal's records carry for what the transitions did
(``workflows.conversation.journal.JournalLog``, pure apart from its clock): a shown write is a
``confirmation.requested`` with its tool and order; a confirmed write awaiting a supervisor an
``approval.requested`` with the amount; the write settled after a decision an
``approval.decided`` (approved or rejected) or an ``approval.expired`` before what became of it;
a refused write an ``operation.refused`` with its rule; an escalation its ``operation.unknown``
before ``conversation.ended`` (escalated); a transfer withdraws the approvals still waiting
(``approval.withdrawn``) and ends ``transferred``; a user's "no" is no event; an undone reversible
write is an ``operation.compensated``; an opened ticket a ``ticket.opened`` with its id, reason and
write; past a reset point every event but ``conversation.started`` has a new key (the epoch),
continued as new it keeps it; no payload holds the customer's email, name, address or payment
method id."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from decimal import Decimal

from tests.policy_fixtures import CARD, CUSTOMER, EMAIL, PENDING, authenticated
from workflows.conversation.journal import JournalLog
from workflows.domain import journal as ev
from workflows.domain import keys
from workflows.domain import transitions as tr
from workflows.domain.actions import make_tool_call
from workflows.domain.policy.approvals import Approval, ApprovalDecision, apply_decision, approval_id_for, expire
from workflows.domain.records import ConversationStatus

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def clock():
    times = iter(T0 + timedelta(seconds=n) for n in range(1000))
    return lambda: next(times)


def setup():
    state = authenticated()
    log = JournalLog(state, clock())
    state.subscribe(log.record)
    log.next_call()  # the model call that proposed the write
    call = make_tool_call("cancel_pending_order", {"order_id": PENDING, "reason": "no longer needed"})
    pending = tr.await_confirmation(state, keys.operation_id(state.conversation_id, state.turn), call, "Cancel it")
    return state, log, pending


def confirm_with_approval(state, pending) -> Approval:
    confirmed = tr.take_pending(state)
    approval = Approval(approval_id=approval_id_for("support-x", pending.operation_id, pending.digest),
                        workflow_id="support-x", operation_id=pending.operation_id, digest=pending.digest,
                        tool="cancel_pending_order", order_id=PENDING, amount=Decimal("826.70"),
                        reasons=["[approval-threshold] above"], requested_at=T0, expires_at=T0 + timedelta(days=1))
    tr.await_approval(state, confirmed, approval)
    return approval


def events(log, state) -> list[tuple[str, dict]]:
    log.said("ok")  # a record is sent when it holds rows
    found = [(e.type.value, e.data) for e in log.take(state).events]
    return [f for f in found if f[0] != "conversation.replied"]


def no_personal_data(found) -> None:
    text = json.dumps(found).lower()
    assert EMAIL.lower() not in text and CUSTOMER.split("_")[0] not in text and CARD not in text


def test_a_shown_write_approved_then_applied():
    state, log, pending = setup()
    approval = confirm_with_approval(state, pending)
    apply_decision(approval, ApprovalDecision(approval_id=approval.approval_id, decision="approve",
                                              approver="sup-ana"), T0 + timedelta(minutes=5))
    tr.apply_write_result(state, pending.call, pending.operation_id, "key", "{}", True)
    found = events(log, state)
    assert [t for t, _ in found] == ["confirmation.requested", "approval.requested", "approval.decided",
                                     "operation.applied"]
    shown, requested, decided, applied = (d for _, d in found)
    assert shown == {"conversation_id": state.conversation_id, "operation_id": pending.operation_id,
                     "tool": "cancel_pending_order", "order_id": PENDING}
    assert requested["amount"] == "826.70" and requested["status"] == "pending" and requested["expires_at"]
    assert decided["decision"] == "approved" and decided["decided_at"]
    assert applied["approval_id"] == approval.approval_id and applied["order_id"] == PENDING
    no_personal_data(found)


def test_a_rejection_and_an_expiry_are_told_before_the_write_is_settled():
    for decide in ("reject", "expire"):
        state, log, pending = setup()
        approval = confirm_with_approval(state, pending)
        if decide == "reject":
            apply_decision(approval, ApprovalDecision(approval_id=approval.approval_id, decision="reject",
                                                      approver="sup-ana"), T0)
        else:
            expire(approval, T0 + timedelta(days=1))
        tr.fail_write(state, state.awaiting_approval[0], "approval", "not approved")
        found = events(log, state)
        assert [t for t, _ in found][-1] == ("approval.decided" if decide == "reject" else "approval.expired")
        assert found[-1][1]["status"] == ("rejected" if decide == "reject" else "expired")


def test_a_refused_write_carries_its_rule_and_a_users_no_is_no_event():
    state, log, pending = setup()
    tr.apply_write_result(state, pending.call, pending.operation_id, "key", "Error: not pending", False)
    found = events(log, state)
    assert found[-1] == ("operation.refused", {"conversation_id": state.conversation_id,
                                               "operation_id": pending.operation_id, "tool": "cancel_pending_order",
                                               "order_id": PENDING, "rule": "tool-error"})

    state, log, pending = setup()
    tr.decline(state, tr.take_pending(state), "user-declined", "the user said no")
    assert [t for t, _ in events(log, state)] == ["confirmation.requested"]


def test_an_escalation_ends_after_its_unknown_outcome_and_a_transfer_withdraws_waiting_approvals():
    state, log, pending = setup()
    tr.escalate(state, pending, "could not be shown to have completed")
    found = events(log, state)
    assert [t for t, _ in found][-2:] == ["operation.unknown", "conversation.ended"]
    assert found[-1][1]["status"] == "escalated"

    state, log, pending = setup()
    approval = confirm_with_approval(state, pending)
    tr.close(state, ConversationStatus.TRANSFERRED, "handed to a human agent")
    found = events(log, state)
    assert [t for t, _ in found][-2:] == ["approval.withdrawn", "conversation.ended"]
    assert found[-2][1]["approval_id"] == approval.approval_id and found[-1][1]["status"] == "transferred"
    no_personal_data(found)


def test_an_undone_write_is_compensated_and_a_ticket_names_its_id_reason_and_write():
    state = authenticated()
    log = JournalLog(state, clock())
    state.subscribe(log.record)
    log.next_call()  # the model call that proposed the write
    call = make_tool_call("modify_user_address", {"user_id": CUSTOMER, "address1": "1 Main St", "address2": "",
                                                  "city": "Austin", "state": "TX", "country": "USA",
                                                  "zip": "78701"})
    operation = keys.operation_id(state.conversation_id, state.turn)
    tr.await_confirmation(state, operation, call, "Change the address")
    tr.apply_write_result(state, call, operation, "key", "{}", True, undo_arguments={"user_id": CUSTOMER})
    tr.compensated(state, state.completed_operations[-1])
    ticket_key = keys.rollback_ticket_key(state.conversation_id)
    tr.ticket_opened(state, ticket_key)
    escalation = keys.escalation_ticket_key(f"modify_user_address:{CUSTOMER}:{operation}")
    tr.ticket_opened(state, escalation, operation)
    found = events(log, state)
    assert [t for t, _ in found][-4:] == ["operation.applied", "operation.compensated", "ticket.opened",
                                          "ticket.opened"]
    assert found[-3][1] == {"conversation_id": state.conversation_id, "operation_id": operation,
                            "tool": "modify_user_address"}
    assert found[-2][1] == {"conversation_id": state.conversation_id, "ticket_id": ev.ticket_id(ticket_key),
                            "reason": "rollback"}
    assert found[-1][1] == {"conversation_id": state.conversation_id, "ticket_id": ev.ticket_id(escalation),
                            "reason": "escalation", "operation_id": operation}
    no_personal_data(found)
    assert "austin" not in json.dumps(found).lower()


def test_past_a_reset_point_events_have_new_keys_and_continued_as_new_they_keep_them():
    state, log, pending = setup()
    log.record(tr.RunStarted())
    before = log.take(state)  # the facts before the reset point
    tr.reset_seen(state, "0a0b0c0d")
    log.record(tr.RunStarted())  # (a run continued as new says it again)
    tr.apply_write_result(state, pending.call, pending.operation_id, "key", "{}", True)
    tr.close(state, ConversationStatus.ENDED, "done")
    log.said("bye")
    after = log.take(state)
    assert all("@" not in e.key for e in before.events)
    started, *rest = after.events
    assert started.key == "started" and rest and all(e.key.endswith("@0a0b0c0d") for e in rest)
    assert after.reset_epoch == "0a0b0c0d"

    carried = type(state).model_validate(state.model_dump(mode="json"))  # continue-as-new carries it
    assert carried.reset_epoch == "0a0b0c0d"
    again = JournalLog(carried, clock())
    again.user_message(carried.turn + 1, "hello again", "msg-9")
    again.said("hi")
    assert [e.key for e in again.take(carried).events] == [f"{ev.reply_key(carried.turn + 1, 1)}@0a0b0c0d"]
