"""Conversation invariants over generated interleavings, in the pure core.

The ``RuleBasedStateMachine`` and its rules live in ``tests/core/conversation_invariants_machine.py``.
Derandomized: a fixed walk of 800 examples. Which walk hypothesis takes still depends on more
than its seed (in a shared process, after other core files, it walks other examples), so the
machine runs in the suite's process like every other test, without the explain phase (its
tracing can run a late failure's shrink into the timeout); a failure is a finding.

The machine's shrunk examples are plain tests here, each on its own steps:

1. A reset re-executes a confirmed address change whose first run committed (its outcome
   unknown and escalated): a before-image read after the write is dropped
   (``usable_before_image``), so a later rollback reports the change as done and not undone,
   and opens a ticket, instead of writing the new address back and telling the user "Undone".
2. A write's unknown outcome escalates the conversation while another confirmed write waits
   for a supervisor: the escalation withdraws the approval and names it to both the user and
   the human's ticket.
3. A reset to before the yes re-executes a write that was approved and applied: the ledger is
   asked before a write is parked, so a rejection never tells the user nothing was changed.
4. A reset to before the yes re-executes a write whose approval expired to a human ticket: the
   ticketing system is asked for the write's approval-expiry ticket before it is parked, so no
   supervisor approves it beside the human agent after the user was told "Nothing has been
   changed yet".
"""

from __future__ import annotations

from decimal import Decimal

from tests.conversation_sim import CUSTOMER, Fate
from tests.core.conversation_invariants_machine import ConversationMachine, OTHER_ADDRESS, WRITES
from workflows.conversation.approvals import HANDED_OVER
from workflows.conversation.compensation import usable_before_image
from workflows.conversation.execute import escalation_summary
from workflows.domain import replies
from workflows.domain.actions import make_tool_call
from workflows.domain.policy.approvals import ApprovalStatus
from workflows.domain.state import ConversationStatus, StepStatus


# --- The machine ---

TestConversationInvariants = ConversationMachine.TestCase


# --- Its shrunk examples ---

USER_ADDRESS = WRITES.index(("modify_user_address", {"user_id": CUSTOMER, **OTHER_ADDRESS}))
CANCEL = next(i for i, (name, args) in enumerate(WRITES)
              if name == "cancel_pending_order" and args["reason"] == "no longer needed")


class _First:
    """A ``data`` argument for the reset rule that picks the first saved yes."""

    def draw(self, strategy):
        return strategy.elements[0] if hasattr(strategy, "elements") else 0


def _machine(threshold: str = "500.00") -> ConversationMachine:
    machine = ConversationMachine()
    machine.start(threshold=Decimal(threshold))
    return machine


def _check(machine: ConversationMachine) -> None:
    machine.no_write_without_the_users_yes_to_its_detail()
    machine.at_most_one_applied_effect_per_key()
    machine.nothing_new_starts_after_a_cancel()
    machine.every_confirmed_write_ends_applied_refused_or_escalated()
    machine.the_user_is_told_only_what_happened()


def test_a_rollback_after_a_reset_does_not_claim_to_undo_what_it_cannot():
    m = _machine()
    m.user_says("benign")
    m.model_proposes_write(USER_ADDRESS)
    m.user_says("yes")
    m.write_meets(Fate.UNKNOWN_COMMITTED)  # committed, the answer lost: escalated
    assert m.d.state.status is ConversationStatus.ESCALATED
    m.reset_and_re_execute_a_yes(_First())  # the operator resets to before the yes
    m.write_meets(Fate.OK)  # the ledger answers with the first run's result
    op = m.d.state.completed_operations[-1]
    assert op.ok and op.undo_arguments is None  # the image read after the write is not kept
    m.model_replies()
    m.cancel(rollback=True)
    said = m.d.said[-1]
    assert "Undone" not in said and "could not be undone" in said
    assert any(key.startswith("rollback:") for key in m.sim.tickets)
    assert m.sim.data["users"][CUSTOMER]["address"]["address1"] == OTHER_ADDRESS["address1"]
    _check(m)


def test_a_first_run_rollback_still_undoes():
    m = _machine()
    m.user_says("benign")
    m.model_proposes_write(USER_ADDRESS)
    m.user_says("yes")
    m.write_meets(Fate.LOST_THEN_RETRIED)  # replayed, but the image was read before the write
    m.model_replies()
    before = m.sim.before[m.d.flights[-1][2]]
    m.cancel(rollback=True)
    assert "Undone" in m.d.said[-1]
    assert m.sim.data["users"][CUSTOMER]["address"] == before
    _check(m)


def test_usable_before_image():
    call = make_tool_call("modify_user_address", {"user_id": CUSTOMER, **OTHER_ADDRESS})
    old = {"user_id": CUSTOMER, **OTHER_ADDRESS, "address1": "557 Sunset Drive"}
    same = {"user_id": CUSTOMER, **OTHER_ADDRESS}
    assert usable_before_image(call, old, replayed=False) == old
    assert usable_before_image(call, same, replayed=False) == same  # first application: a no-op change
    assert usable_before_image(call, old, replayed=True) == old  # read before the first attempt applied
    assert usable_before_image(call, same, replayed=True) is None  # read after the write had applied
    assert usable_before_image(call, None, replayed=True) is None


def test_an_escalation_names_the_writes_awaiting_a_supervisor():
    m = _machine()
    m.user_says("benign")
    m.model_proposes_write(CANCEL)  # 826.70: above the 500.00 threshold
    m.user_says("yes")
    assert m.d.state.pending_approvals()
    detail = m.d.state.awaiting_approval[0].detail
    m.user_says("benign")
    m.model_proposes_write(USER_ADDRESS)
    m.user_says("yes")
    m.write_meets(Fate.UNKNOWN_COMMITTED)
    state = m.d.state
    assert state.status is ConversationStatus.ESCALATED
    assert state.approvals[0].status is ApprovalStatus.WITHDRAWN
    assert next(s for s in state.steps if s.detail == detail).status is StepStatus.CANCELLED
    assert m.d.said[-1].startswith(replies.ESCALATED) and detail in m.d.said[-1]
    assert any(detail in summary for key, summary in m.sim.tickets.items() if key.startswith("escalate:"))
    _check(m)


def test_escalation_texts_without_withdrawn_writes_are_unchanged():
    assert replies.escalated([]) == replies.ESCALATED
    assert escalation_summary("why", []) == "why"
    assert "cancel it" in escalation_summary("why", ["cancel it"])


RETURN_ALL = next(i for i, (name, args) in enumerate(WRITES)
                  if name == "return_delivered_order_items" and len(args["item_ids"]) > 1)


def test_a_rejection_after_a_reset_does_not_deny_an_applied_write():
    # 3. a reset re-executes the yes of a write that a supervisor approved and that applied. The
    # ledger is asked before a write is parked (``recorded_before_approval``): it is recorded as
    # applied, never parked again, so no rejection, expiry or cancel can deny it (parked again, a
    # rejection would tell the user "nothing was changed" although the refund was made).
    m = _machine()
    m.user_says("benign")
    m.model_proposes_write(RETURN_ALL)  # 980.87: above the threshold
    m.user_says("yes")
    m.supervisor_decides(approve=True, last=False)
    m.write_meets(Fate.OK)
    key = m.d.flights[-1][2]
    assert m.sim.applied[key] == 1
    m.reset_and_re_execute_a_yes(_First())
    assert not m.d.state.pending_approvals()  # not parked again: no supervisor is asked twice
    op = m.d.state.completed_operations[-1]
    assert op.idempotency_key == key and op.ok and op.undo_arguments is None
    assert next(s for s in m.d.state.steps if s.operation_id == op.operation_id).status is StepStatus.DONE
    m.model_replies()
    m.cancel(rollback=False)
    assert m.sim.applied[key] == 1
    assert "nothing was changed" not in " ".join(m.d.said) and "nothing was changed" not in " ".join(m.d.told)
    _check(m)


def test_a_first_yes_still_parks_for_a_supervisor():
    # the ledger holds nothing under the key: the write waits for a supervisor
    m = _machine()
    m.user_says("benign")
    m.model_proposes_write(RETURN_ALL)
    m.user_says("yes")
    assert m.d.state.pending_approvals() and any(c.kind == "lookup" for c in m.sim.calls)
    assert any(c.name == "find_ticket" for c in m.sim.calls)  # no earlier expiry's ticket: parked
    m.supervisor_decides(approve=False, last=False)
    assert "nothing was changed" in m.d.told[-1]  # nothing ran: the rejection is told as it is
    _check(m)


def test_a_reset_does_not_re_park_a_write_handed_to_a_human_when_its_approval_expired():
    # 4. the approval runs out of time (ticket opened, "Nothing has been changed yet") and a reset
    # re-executes the yes: the write is not parked again, so it cannot be approved and applied
    # beside the human agent ("told not done but ... applied")
    m = _machine()
    m.user_says("benign")
    m.model_proposes_write(RETURN_ALL)  # 980.87: above the threshold
    m.user_says("yes")
    m.approval_runs_out_of_time()
    key = m.d.flights[-1][2] if m.d.flights else m.d.confirmed[-1][1]
    assert f"approval-expired:{key}" in m.sim.tickets and "Nothing has been changed yet" in m.d.told[-1]
    m.reset_and_re_execute_a_yes(_First())  # the operator resets to before the yes
    assert not m.d.state.pending_approvals()  # not parked again: no supervisor can approve it beside the human
    step = next(s for s in m.d.state.steps if s.operation_id == m.d.confirmed[-1][0])
    assert step.status is StepStatus.FAILED and step.error == HANDED_OVER
    assert "already with a human agent" in m.d.said[-1] and "Nothing has been changed yet" in m.d.said[-1]
    assert m.sim.applied[key] == 0 and len([k for k in m.sim.tickets if k.startswith("approval-expired:")]) == 1
    _check(m)
