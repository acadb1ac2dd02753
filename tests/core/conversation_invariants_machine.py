"""Invariants of a conversation over generated interleavings (pure core).

A hypothesis ``RuleBasedStateMachine`` drives the pure core of ``SupportWorkflow``, composed
as the workflow composes it (``tests.conversation_driver``), against a simulated system of
record whose ledger is keyed by the idempotency key the workflow computes
(``tests.conversation_sim``). Rules: user messages (benign, an explicit yes, no, "yes
but...", a new unrelated message, one sent while the model is still thinking), model
proposals (reads; reversible and irreversible writes with arguments valid and invalid
under the policy; replies), write outcomes (applied, applied with the answer lost and
retried, unknown after commit, unknown and absent, refused because another agent changed
the order), supervisor decisions and expiries, bad decisions, cancels with and without
rollback, and resets (a turn re-executed from the state saved before it).

After every step: no write without the user's explicit yes to that exact proposal, sent
after it was shown; at most one applied effect per key, and a re-executed turn uses the
same key; nothing new starts after a cancel except the write in flight, compensations and
tickets; every confirmed write ends applied, refused with a reason, or escalated; the
user is never told an effect happened (or was undone, or did not happen) unless it did.
"""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from temporalio.exceptions import ApplicationError

from tests.conversation_driver import Driver
from tests.conversation_sim import CARD, CUSTOMER, DELIVERED, EMAIL, GIFT, PENDING, Fate, SimSystem
from workflows.domain import transitions as tr
from workflows.domain.actions import ReplyAction, ToolCallAction, make_tool_call
from workflows.conversation.approvals import HANDED_OVER, ready_to_settle
from workflows.domain.policy.approvals import ApprovalDecision, ApprovalPolicy, ApprovalStatus, check_decision
from workflows.domain.contracts import CancelRequest
from workflows.domain.records import Phase as ConversationPhase
from workflows.domain.state import ConversationState, ConversationStatus

ADDRESS = {"address1": "1 Main St", "address2": "", "city": "Austin", "state": "TX", "country": "USA",
           "zip": "78701"}
OTHER_ADDRESS = {**ADDRESS, "address1": "9 Elm St"}

TEXTS = {
    "benign": "I have a question about my orders.",
    "yes": "yes",
    "no": "no",
    "yes_but": "yes but only the first item",
    "unrelated": "Actually, what is your return policy?",
}

KINDS = ["yes", "benign", "yes", "no", "yes_but", "unrelated", "yes"]
"""What the user says, an explicit yes more often (the hard cases start with a confirmed write)."""

READS = [("get_order_details", {"order_id": PENDING}), ("get_order_details", {"order_id": DELIVERED}),
         ("get_user_details", {"user_id": CUSTOMER})]


def _writes() -> list[tuple[str, dict]]:
    sim = SimSystem()
    delivered = [i["item_id"] for i in sim.data["orders"][DELIVERED]["items"]]
    return [
        ("modify_pending_order_address", {"order_id": PENDING, **ADDRESS}),  # reversible
        ("modify_pending_order_address", {"order_id": PENDING, **OTHER_ADDRESS}),  # same key shape, other args
        ("modify_pending_order_address", {"order_id": DELIVERED, **ADDRESS}),  # invalid: not pending
        ("modify_user_address", {"user_id": CUSTOMER, **OTHER_ADDRESS}),  # reversible, customer
        ("modify_user_address", {"user_id": "noah_brown_6181", **ADDRESS}),  # invalid: another customer
        ("cancel_pending_order", {"order_id": PENDING, "reason": "no longer needed"}),  # irreversible, 826.70
        ("cancel_pending_order", {"order_id": PENDING, "reason": "it is too slow"}),  # invalid reason
        ("return_delivered_order_items", {"order_id": DELIVERED, "item_ids": delivered[:1],
                                          "payment_method_id": CARD}),  # irreversible, small
        ("return_delivered_order_items", {"order_id": DELIVERED, "item_ids": delivered,
                                          "payment_method_id": CARD}),  # 980.87: over the threshold
        ("return_delivered_order_items", {"order_id": DELIVERED, "item_ids": delivered[:1],
                                          "payment_method_id": GIFT}),  # refund elsewhere
        ("return_delivered_order_items", {"order_id": PENDING, "item_ids": delivered[:1],
                                          "payment_method_id": CARD}),  # invalid: not delivered
    ]


WRITES = _writes()


@lru_cache
def _opening_state() -> str:
    """An authenticated conversation that has read the customer, two orders and their products."""
    sim = SimSystem()
    state = ConversationState(conversation_id="prop")
    tr.receive_user_message(state, f"Hi, my email is {EMAIL}")
    reads = [("find_user_id_by_email", {"email": EMAIL}), *READS]
    reads += [("get_product_details", {"product_id": p}) for p in sim.data["products"]]
    for name, args in reads:
        call = make_tool_call(name, args)
        tr.apply_read_result(state, call, sim.read(call).result)
    return state.model_dump_json()


class ConversationMachine(RuleBasedStateMachine):
    """One conversation against one simulated system of record."""

    @initialize(threshold=st.sampled_from([Decimal("500.00"), Decimal("0.00"), Decimal("100000.00")]))
    def start(self, threshold: Decimal) -> None:
        self.sim = SimSystem()
        self.d = Driver(ConversationState.model_validate_json(_opening_state()), self.sim,
                        ApprovalPolicy(threshold=threshold, timeout_seconds=3600))
        self.user_yes: set[tuple[str, str]] = set()
        self.snapshots: list[dict] = []
        self.cancel_mark: int | None = None
        self.allowed_after_cancel: str | None = None
        self.resets = 0
        self.claim_epochs: list[int] = []
        """How many resets had happened when each of ``d.claims`` was made (the step that made it)."""
        self.out_of_band = False

    # --- preconditions ---------------------------------------------------------
    def idle(self) -> bool:
        d = self.d
        return d.state.is_open() and d.cancel is None and not d.turn_open and d.in_flight is None

    def listening(self) -> bool:
        """Idle with nothing to settle first: the main loop takes the next message."""
        return self.idle() and not ready_to_settle(self.d.state, self.d.now)

    def thinking(self) -> bool:
        d = self.d
        return d.state.is_open() and d.cancel is None and d.turn_open and d.in_flight is None

    # --- the user ----------------------------------------------------------------
    def _send(self, kind: str) -> tuple[str, str | None, str | None]:
        """The user sends ``kind``; returns (text, the pending proposal as the update sees it)."""
        shown = self.d.last_reply_prompt
        if kind == "yes" and shown is not None:
            self.user_yes.add((shown.operation_id, shown.digest))
        pending = self.d.state.pending_confirmation
        return TEXTS[kind], pending.operation_id if pending else None, pending.digest if pending else None

    @precondition(lambda self: self.listening())
    @rule(kind=st.sampled_from(KINDS))
    def user_says(self, kind: str) -> None:
        text, op, digest = self._send(kind)
        self.snapshots.append({"message": (text, op, digest), "state": self.d.state.model_dump_json(),
                               "prompt": self.d.last_reply_prompt, "confirmed": len(self.d.confirmed),
                               "flights": len(self.d.flights)})
        self.d.message(text, op, digest)

    @precondition(lambda self: self.listening())
    @rule(kind=st.sampled_from(KINDS), reads=st.lists(st.integers(0, len(READS) - 1), max_size=2),
          final=st.integers(-1, len(WRITES) - 1))
    def user_turn(self, kind: str, reads: list[int], final: int) -> None:
        """A whole turn in one step: the message, the model's reads, then a write proposal
        (``final`` >= 0) or a reply; it stops early when the turn ends or a write goes in flight."""
        self.user_says(kind)
        for i in reads:
            if self.thinking():
                self.model_reads(i)
        if self.thinking():
            self.model_proposes_write(final) if final >= 0 else self.model_replies()

    @precondition(lambda self: self.thinking() and self.d.newer is None)
    @rule(kind=st.sampled_from(sorted(TEXTS)))
    def user_says_more_while_model_thinks(self, kind: str) -> None:
        self.d.newer = self._send(kind)

    # --- the model ---------------------------------------------------------------
    @precondition(lambda self: self.thinking())
    @rule(i=st.integers(0, len(READS) - 1))
    def model_reads(self, i: int) -> None:
        self.d.propose(ToolCallAction(tool=make_tool_call(*READS[i])))

    @precondition(lambda self: self.thinking())
    @rule(i=st.integers(0, len(WRITES) - 1))
    def model_proposes_write(self, i: int) -> None:
        self.d.propose(ToolCallAction(tool=make_tool_call(*WRITES[i])))

    @precondition(lambda self: self.thinking())
    @rule()
    def model_replies(self) -> None:
        self.d.propose(ReplyAction(text="Is there anything else I can help you with?"))

    # --- the system of record ---------------------------------------------------------
    @precondition(lambda self: self.d.in_flight is not None)
    @rule(fate=st.sampled_from(list(Fate)))
    def write_meets(self, fate: Fate) -> None:
        self.d.finish_write(fate)

    @precondition(lambda self: not self.out_of_band)
    @rule()
    def another_agent_cancels_the_pending_order(self) -> None:
        self.out_of_band = True
        self.sim.cancel_out_of_band(PENDING)

    # --- supervisors ---------------------------------------------------------------
    # the update lands at any time (also during a turn or a write); the main loop settles between turns
    @precondition(lambda self: self.d.state.is_open() and self.d.cancel is None and self.d.state.pending_approvals())
    @rule(approve=st.booleans(), last=st.booleans())
    def supervisor_decides(self, approve: bool, last: bool) -> None:
        d = self.d
        approval = d.state.pending_approvals()[-1 if last else 0]
        decision = ApprovalDecision(approval_id=approval.approval_id, decision="approve" if approve else "reject",
                                    approver="alice")
        if d.now >= approval.expires_at:  # ran out of time, not settled yet (a turn is running): refused
            with pytest.raises(ApplicationError):
                check_decision(d.state.approvals, decision, d.now)
            return
        tr.decide_approval(d.state, check_decision(d.state.approvals, decision, d.now), decision, d.now)
        if self.idle():
            d.settle()

    @precondition(lambda self: self.idle() and self.d.state.pending_approvals())
    @rule()
    def approval_runs_out_of_time(self) -> None:
        d = self.d
        d.advance((d.state.pending_approvals()[0].expires_at - d.now).total_seconds() + 1)
        d.settle()

    @precondition(lambda self: any(a.status is not ApprovalStatus.PENDING or not self.d.state.is_open()
                                   for a in self.d.state.approvals))
    @rule(approve=st.booleans())
    def a_second_decision_is_refused(self, approve: bool) -> None:
        d = self.d
        decided = next(a for a in d.state.approvals if a.status is not ApprovalStatus.PENDING or not d.state.is_open())
        before = d.state.model_dump_json()
        decision = ApprovalDecision(approval_id=decided.approval_id, decision="approve" if approve else "reject",
                                    approver="bob")
        if decided.status is ApprovalStatus.PENDING:  # still pending in a closed conversation: the validator refuses
            assert not d.state.is_open()
            return
        with pytest.raises(ApplicationError):
            check_decision(d.state.approvals, decision, d.now)
        assert d.state.model_dump_json() == before

    @rule(seconds=st.sampled_from([1.0, 600.0]))
    def time_passes(self, seconds: float) -> None:
        """Always possible (also once the conversation is over): the main loop wakes for an expiry."""
        self.d.advance(seconds)
        if self.idle():
            self.d.settle()

    # --- cancels and resets -------------------------------------------------------
    # a cancel only matters once something was confirmed: earlier, it would end most runs before they reach a write
    @precondition(lambda self: self.d.state.is_open() and self.d.cancel is None and self.d.confirmed)
    @rule(rollback=st.booleans())
    def cancel(self, rollback: bool) -> None:
        self.cancel_mark = len(self.sim.calls)
        self.allowed_after_cancel = self.d.in_flight.key if self.d.in_flight else None
        self.d.request_cancel(CancelRequest(reason="the user cancelled", rollback=rollback))

    @precondition(lambda self: self.d.cancel is None and self.d.in_flight is None and not self.d.turn_open
                  and any(s["message"][0] == "yes" for s in self.snapshots))
    @rule(data=st.data())
    def reset_and_re_execute_a_yes(self, data: st.DataObject) -> None:
        d = self.d
        yeses = [i for i, s in enumerate(self.snapshots) if s["message"][0] == "yes"]
        index = data.draw(st.sampled_from(yeses))
        snap = self.snapshots[index]
        del self.snapshots[index + 1:]
        first = {op: key for op, _, key in d.flights[snap["flights"]:]}
        d.state = ConversationState.model_validate_json(snap["state"])
        d.turn_open, d.newer, d.settling, d.told = False, None, [], []
        d.last_reply_prompt = snap["prompt"]
        del d.confirmed[snap["confirmed"]:]
        flights = len(d.flights)
        self.resets += 1
        d.message(*snap["message"])
        for op, _, key in d.flights[flights:]:
            assert first.get(op, key) == key, f"the re-executed turn computed another key for {op}"

    def teardown(self) -> None:
        """What the run reached (``--hypothesis-show-statistics``): the rules must reach the hard cases."""
        if not hasattr(self, "d"):
            return
        state = self.d.state
        event(f"writes started: {min(len(self.d.flights), 3)}")
        event(f"status: {state.status.value}")
        if self.resets and self.d.flights:
            event("reset re-executed a yes")
        if any(op.compensated for op in state.completed_operations):
            event("rollback compensated a write")
        for approval in state.approvals:
            event(f"approval {approval.status.value}")
        if any(t.startswith("escalate:") for t in self.sim.tickets):
            event("unknown outcome escalated")

    # --- invariants -----------------------------------------------------------------
    @invariant()
    def no_write_without_the_users_yes_to_its_detail(self) -> None:
        if not hasattr(self, "d"):
            return
        for op, digest, key in self.d.flights:
            assert (op, digest) in self.user_yes, f"{key} ran without the user's yes to what was shown"
        started = {key for _, _, key in self.d.flights}
        for call in self.sim.calls:
            if call.kind == "write":
                assert call.tag == "compensation" or call.tag == f"flight:{call.key}", call
                assert call.tag == "compensation" or call.key in started, call

    @invariant()
    def the_phase_says_where_the_conversation_stands(self) -> None:
        """Set by the transitions alone, the phase agrees with what it summarises: active while
        the status is, closing exactly while a cancel is pending, and otherwise awaiting a
        supervisor while an approval is pending, the user while a write is shown."""
        if not hasattr(self, "d"):
            return
        state, cancel = self.d.state, self.d.cancel
        assert state.phase.active == (state.status is ConversationStatus.ACTIVE), (state.phase, state.status)
        if not state.phase.active:
            assert state.phase is ConversationPhase.CLOSED
            return
        assert (state.phase is ConversationPhase.CLOSING) == (cancel is not None), (state.phase, cancel)
        if state.phase.serving:
            expected = (ConversationPhase.AWAITING_APPROVAL if state.pending_approvals()
                        else ConversationPhase.AWAITING_CONFIRMATION if state.pending_confirmation
                        else ConversationPhase.OPEN)
            assert state.phase is expected, (state.phase, expected)

    @invariant()
    def at_most_one_applied_effect_per_key(self) -> None:
        if hasattr(self, "sim"):
            assert all(n <= 1 for n in self.sim.applied.values()), self.sim.applied

    @invariant()
    def nothing_new_starts_after_a_cancel(self) -> None:
        if getattr(self, "cancel_mark", None) is None:
            return
        for call in self.sim.calls[self.cancel_mark:]:
            assert (call.kind == "ticket" or call.tag == "compensation"
                    or (self.allowed_after_cancel and call.tag == f"flight:{self.allowed_after_cancel}")), call

    @invariant()
    def every_confirmed_write_ends_applied_refused_or_escalated(self) -> None:
        if not hasattr(self, "d"):
            return
        d, state = self.d, self.d.state
        ops = {op.operation_id: op for op in state.completed_operations}
        approvals = {a.operation_id: a for a in state.approvals}
        for op, key, _ in d.confirmed:
            if d.in_flight is not None and d.in_flight.key == key:
                continue
            if op in ops:
                assert ops[op].ok or ops[op].result.strip(), f"{key} refused without a reason"
                continue
            if f"escalate:{key}" in self.sim.tickets:
                continue
            step = next(s for s in state.steps if s.operation_id == op)
            if step.error == HANDED_OVER:  # an earlier timeline's approval expired: a human agent has it
                assert f"approval-expired:{key}" in self.sim.tickets, f"{key} said handed over without a ticket"
                continue
            approval = approvals.get(op)
            assert approval is not None, f"{key} was confirmed and then dropped"
            parked = {c.operation_id for c in state.awaiting_approval} | {c.operation_id for c, _ in d.settling}
            if approval.status is ApprovalStatus.PENDING or op in parked:  # decided, settled when the loop is idle
                continue
            if approval.status is ApprovalStatus.REJECTED:
                continue
            if approval.status is ApprovalStatus.EXPIRED:
                assert f"approval-expired:{key}" in self.sim.tickets, f"{key} expired without a ticket"
                continue
            if (approval.status in (ApprovalStatus.WITHDRAWN, ApprovalStatus.APPROVED)
                    and state.status is ConversationStatus.ESCALATED):
                # another write's unknown outcome escalated (also one settled before it in the same
                # batch): the human's ticket and the user both hear of it
                detail = next(s.detail for s in state.steps if s.operation_id == op)
                assert any(detail in text for text in self.sim.tickets.values()), f"{key} withdrawn, not in a ticket"
                assert any(detail in text for text in d.said), f"{key} withdrawn without telling the user"
                continue
            # approved but never run, or withdrawn: only a cancel may stop it, and the summary says "Not done"
            assert state.status is ConversationStatus.CANCELLED, (
                f"{key} ({approval.status.value}) was dropped when the conversation became {state.status.value}")

    @invariant()
    def the_user_is_told_only_what_happened(self) -> None:
        if not hasattr(self, "d"):
            return
        self.claim_epochs += [self.resets] * (len(self.d.claims) - len(self.claim_epochs))
        for (claim, effect, text), epoch in zip(self.d.claims, self.claim_epochs):
            applied = self.sim.effects[effect]
            if claim == "done":
                assert applied == 1, f"told done but {effect} did not apply: {text}"
            elif claim == "not_done":
                # true when told, and after no reset since; a write said to be a human agent's stays
                # unmade for ever. A reset that re-executes a yes may bring a rejected write back to a
                # supervisor, whose approval then makes it (the user is told so): a new decision
                if epoch == self.resets or "human agent" in text:
                    assert applied == 0, f"told not done but {effect} applied: {text}"
            else:
                key = effect.split("|")[0]
                op = next(o for o in reversed(self.d.state.completed_operations) if o.idempotency_key == key)
                table = "users" if "user_id" in op.arguments else "orders"
                subject = op.arguments.get("user_id") or op.arguments["order_id"]
                now = self.sim.data[table][subject]["address"]
                assert applied == 1 and now == self.sim.before[key], f"told undone but {key} is not: {text}"
        if self.resets == 0:
            for text in self.d.said:
                if "Nothing had been changed." in text:
                    live = [k for k, n in self.sim.applied.items() if n and not k.endswith(".undo")
                            and not any(o.idempotency_key == k and o.compensated
                                        for o in self.d.state.completed_operations)]
                    assert not live, f"told nothing changed, but {live} applied"


# no explain phase: it traces every line (Python 3.11) and, after a failure found late, ran the
# shrink into the 300 s test timeout; a failure is reported shrunk, without the explanation
ConversationMachine.TestCase.settings = settings(
    derandomize=True, max_examples=800, stateful_step_count=50, deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
