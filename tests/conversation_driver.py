"""The pure core of ``SupportWorkflow`` composed as the workflow composes it
(``workflows.conversation.workflow``, ``turn``, ``execute``, ``approval_flow``, ``cancellation``,
``compensation``), with every activity answered by ``tests.conversation_sim.SimSystem``
and every decision taken by the real pure functions (policy, confirmation, keys,
transitions, approvals, replies, the cancel summary).

The async workflow code is mirrored step by step rather than run, so that a write can
be left in flight while a cancel or a supervisor's decision arrives: one ``Driver``
method per point where the workflow waits. Used by tests/core/conversation_invariants_machine.py.
"""

from __future__ import annotations

import json

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

from workflows.domain import keys, replies
from workflows.domain import transitions as tr
from workflows.conversation.approvals import (
    HANDED_OVER,
    _outcome,
    needs_approval,
    ready_to_settle,
    record_recorded,
    request_approval,
)
from workflows.domain.policy.approvals import ApprovalPolicy, ApprovalStatus, expiry_ticket_summary
from workflows.domain.actions import call_arguments, make_tool_call
from workflows.domain.catalogue import Execution, ToolClass, spec_of
from workflows.domain.catalogue.checks import status_refusal
from workflows.conversation.cancellation import summary
from workflows.domain.policy.clauses import Rule
from workflows.conversation.compensation import usable_before_image
from workflows.domain.policy.confirm import describe, is_no, is_yes
from workflows.domain.contracts import CancelRequest, Outcome, ToolResult
from workflows.conversation.execute import escalation_summary
from workflows.options import MAX_CONSECUTIVE_REJECTIONS, MAX_MODEL_STEPS_PER_TURN
from workflows.domain.policy.validator import handed_over_refusal, validate_execution, validate_proposal
from workflows.domain.state import (
    Confirmation,
    ConversationState,
    ConversationStatus,
    PendingConfirmation,
    Role,
    StepStatus,
)

from tests.conversation_sim import Fate, SimSystem, identity

WORKFLOW_ID = "support-prop"
START = datetime(2026, 1, 1, tzinfo=timezone.utc)


@dataclass
class InFlight:
    """A confirmed write whose request is on its way (``execute_confirmed`` awaiting it)."""

    pending: PendingConfirmation
    key: str
    undo: Optional[dict[str, Any]]
    source: str  # "turn" or "approval"
    approved_by: Optional[str] = None


@dataclass
class Driver:
    """One conversation: the state, the system, and where the workflow stands."""

    state: ConversationState
    sim: SimSystem
    policy: ApprovalPolicy
    now: datetime = START
    turn_open: bool = False
    """The agent loop of the current user message is running (the model is asked next)."""
    steps_this_turn: int = 0
    rejections_in_a_row: int = 0
    newer: Optional[tuple[str, Optional[str], Optional[str]]] = None
    """A message queued while the turn runs: (text, seen operation id, seen digest)."""
    in_flight: Optional[InFlight] = None
    settling: list[tuple[PendingConfirmation, Any]] = field(default_factory=list)
    told: list[str] = field(default_factory=list)
    cancel: Optional[CancelRequest] = None
    said: list[str] = field(default_factory=list)
    """Everything statekeeper said to the user, in order (replies, notices, the cancel summary)."""
    last_reply_prompt: Optional[PendingConfirmation] = None
    """The proposal the last reply asked the user to confirm (what the user last saw)."""
    flights: list[tuple[str, str, str]] = field(default_factory=list)
    """Every write started: (operation id, call digest, idempotency key)."""
    confirmed: list[tuple[str, str, str]] = field(default_factory=list)
    """Every write the user's yes let through ``validate_execution``: (operation id, key, effect identity)."""
    claims: list[tuple[str, str, str]] = field(default_factory=list)
    """What the user was told about a write: (claim, effect identity, text); claim done, undone or not_done."""

    # --- what the workflow says -------------------------------------------------
    def notify(self, text: str) -> None:
        """Told outside a turn (an approval's outcome): an assistant turn now, and the start
        of the next reply the user reads."""
        tr.add_turn(self.state, Role.ASSISTANT, text)
        self.told.append(text)

    def answer(self, text: str) -> None:
        """A turn ends with ``text`` (notices told outside a turn open it, as ``_answer`` does)."""
        tr.add_turn(self.state, Role.ASSISTANT, text)
        self.said.append(" ".join([*self.told, text]))
        self.told = []
        self.turn_open = False
        self.last_reply_prompt = self.state.pending_confirmation
        if self.newer is not None and self.state.is_open() and self.cancel is None:
            text, op, digest = self.newer
            self.newer = None
            self.message(text, op, digest)

    # --- a user message (``Turn.run``) -------------------------------------------
    def message(self, text: str, seen_op: Optional[str], seen_digest: Optional[str]) -> None:
        """Process one user message; ``seen_*``: the pending proposal when it was accepted."""
        state = self.state
        tr.receive_user_message(state, text)
        self.steps_this_turn = self.rejections_in_a_row = 0
        self.turn_open = True
        pending = tr.take_pending(state)
        if pending is None:
            return
        if not is_yes(text):
            declined = "the user declined" if is_no(text) else "the user changed the subject"
            tr.decline(state, pending, Rule.USER_DECLINED.value, f"{declined}: {pending.detail}")
            return
        confirmation = Confirmation(operation_id=seen_op or "", digest=seen_digest or "", turn=state.turn,
                                    verbatim=text)
        verdict = validate_execution(state, pending, confirmation)
        if not verdict.accepted:
            tr.decline(state, pending, verdict.rule.value, verdict.reason)
            return
        key = keys.idempotency_key(pending.call, pending.operation_id)
        self.confirmed.append((pending.operation_id, key, identity(key, call_arguments(pending.call))))
        if needs_approval(state, pending, self.policy):  # ``recorded_before_approval``: the ledger first
            recorded = self.sim.recorded(pending.call, key)
            if recorded is not None:  # a reset re-executed the yes of a write that ran: recorded, not parked
                return record_recorded(state, pending, recorded)
            if self.handed_over(pending):  # ``handed_over``: its approval expired in the first run
                return self.answer(self.claims[-1][2])
        if request_approval(state, pending, self.policy, WORKFLOW_ID, self.now) is not None:
            self.answer(replies.awaiting_approval(pending.detail))
        else:
            self.start_write(pending, "turn")

    def handed_over(self, confirmed: PendingConfirmation) -> bool:
        """``approval_flow.handed_over``: the ticketing system holds the write's approval-expiry
        ticket (an earlier timeline expired it), so it is a human agent's; records the claim told."""
        key = keys.idempotency_key(confirmed.call, confirmed.operation_id)
        if not self.sim.has_ticket(keys.approval_expiry_ticket_key(key)):
            return False
        tr.finish_step(self.state, confirmed.operation_id, StepStatus.FAILED, HANDED_OVER)
        self.claims.append(("not_done", identity(key, call_arguments(confirmed.call)),
                            replies.already_handed_over(confirmed.detail)))
        return True

    # --- the model's proposals (``_agent_loop``) ---------------------------------
    def propose(self, action: Any) -> None:
        """The model proposes ``action`` (one ``ProposedAction``) in the running turn."""
        state = self.state
        self.steps_this_turn += 1
        is_read = action.kind == "tool_call" and not spec_of(action.tool.name).is_write
        if self.newer is not None and not is_read:
            tr.reject(state, Rule.SUPERSEDED.value, "a newer user message arrived", action.model_dump(mode="json"))
            return self.answer(replies.SUPERSEDED)
        verdict = validate_proposal(state, action)
        if verdict.accepted:  # as the workflow: no write beside a human agent who has the order's change
            verdict = handed_over_refusal(state, action) or verdict
        if not verdict.accepted:
            tr.reject(state, verdict.rule.value, verdict.reason, action.model_dump(mode="json"))
            self.rejections_in_a_row += 1
        elif action.kind == "reply":
            return self.answer(action.text)
        elif not verdict.needs_confirmation:
            self.rejections_in_a_row = 0
            result = self.sim.read(action.tool)
            tr.apply_read_result(state, action.tool, result.result)
        else:
            operation = keys.operation_id(state.conversation_id, state.turn)
            tr.await_confirmation(state, operation, action.tool, describe(state, action.tool))
            return self.answer(replies.confirmation_prompt(state.pending_confirmation.detail))
        if self.rejections_in_a_row >= MAX_CONSECUTIVE_REJECTIONS:
            last = state.last_rejection()
            return self.answer(replies.refused(last.rule if last else ""))
        if self.steps_this_turn >= MAX_MODEL_STEPS_PER_TURN:
            return self.answer(replies.COULD_NOT_FINISH)

    # --- a confirmed write (``execute_confirmed``) -------------------------------
    def start_write(self, pending: PendingConfirmation, source: str, approved_by: Optional[str] = None) -> None:
        """Everything before the write request: the step runs, the before-image is read."""
        call = pending.call
        key = keys.idempotency_key(call, pending.operation_id)
        tr.finish_step(self.state, pending.operation_id, StepStatus.RUNNING)
        undo = None
        spec = spec_of(call.name)
        if spec.tool_class is ToolClass.REVERSIBLE_WRITE and spec.subject is not None:  # before_image
            subject_id = getattr(call.arguments, spec.subject)
            doc = self.sim.document(spec.subject, subject_id)
            value = doc.get(spec.compensation_from or "") if doc else None
            undo = {spec.subject: subject_id, **value} if isinstance(value, dict) else None
        self.flights.append((pending.operation_id, pending.digest, key))
        self.in_flight = InFlight(pending, key, undo, source, approved_by)

    def _refund(self, flight: InFlight, fate: Fate) -> ToolResult:
        """``RefundWorkflow.run``: ledger first, fresh read, precondition, write."""
        call = flight.pending.call
        recorded = self.sim.recorded(call, flight.key)
        if recorded is not None:
            return recorded
        read = self.sim.read(make_tool_call("get_order_details", {"order_id": call.arguments.order_id}))
        if not read.ok:
            return ToolResult(result=read.result, outcome=Outcome.REFUSED)
        order = json.loads(read.result)
        spec = spec_of(call.name)
        failed = status_refusal(spec.name, spec.status, order["order_id"], order.get("status", ""),
                                len(order.get("payment_history", [])))
        if failed is not None:
            return ToolResult(result=f"Error: {failed[1]} ({failed[0].value})", outcome=Outcome.REFUSED)
        return self.sim.write(call, flight.key, fate)

    def finish_write(self, fate: Fate) -> None:
        """The write request meets ``fate``; the rest of ``execute_confirmed`` and its caller."""
        flight, self.in_flight = self.in_flight, None
        assert flight is not None
        state, call, operation = self.state, flight.pending.call, flight.pending.operation_id
        spec = spec_of(call.name)
        self.sim.tag = f"flight:{flight.key}"
        if spec.execution is Execution.REFUND_WORKFLOW:
            result = self._refund(flight, fate)
        else:
            result = self.sim.write(call, flight.key, fate)
        self.sim.tag = ""  # what follows is not the write in flight
        ended = None
        if result.outcome is Outcome.UNKNOWN:
            reason = f"{call.name} could not be shown to have completed ({result.result}); escalated to a human agent"
            tr.finish_step(state, operation, StepStatus.FAILED, reason)
            withdrawn = [c.detail for c in state.awaiting_approval]
            self.sim.ticket(keys.escalation_ticket_key(flight.key), escalation_summary(reason, withdrawn))
            tr.close(state, ConversationStatus.ESCALATED, reason)
            ended = replies.escalated(withdrawn)
        else:
            tr.apply_write_result(state, call, operation, flight.key, result.result, result.ok,
                                  None, usable_before_image(call, flight.undo, result.replayed))
            if result.ok and spec.execution is Execution.REFUND_WORKFLOW and self.cancel is None:
                refresh = make_tool_call("get_user_details", {"user_id": state.customer.user_id})
                tr.apply_read_result(state, refresh, self.sim.read(refresh).result)
        if flight.source == "turn":
            if ended is not None:
                self.answer(ended)
        else:
            if ended is None:
                outcome = _outcome(state, flight.pending)
                ended = replies.approved(flight.pending.detail, outcome)
                self.claims.append(("done" if outcome is None else "not_done",
                                    identity(flight.key, call_arguments(call)), ended))
            self.notify(ended)
            if not state.is_open():
                self.settling = []  # ``settle_approvals`` stops at a closed conversation
            self.settle_rest()
        if self.cancel is not None and self.in_flight is None:
            self.run_cancel()

    # --- approvals (``settle_approvals``) ----------------------------------------
    def settle(self) -> None:
        """The main loop settles decided or expired approvals (outside any turn)."""
        if not ready_to_settle(self.state, self.now):
            return
        tr.expire_approvals(self.state, self.now)
        # as the workflow: each leaves when settled, an escalation names the rest
        self.settling = tr.decided_writes(self.state)
        self.settle_rest()

    def settle_rest(self) -> None:
        """The rest of ``settle_approvals``' loop: until a write goes in flight."""
        while self.settling and self.in_flight is None:
            confirmed, approval = self.settling.pop(0)
            tr.take_awaiting(self.state, confirmed)
            write_key = keys.idempotency_key(confirmed.call, confirmed.operation_id)
            effect = identity(write_key, call_arguments(confirmed.call))
            if approval.status is not ApprovalStatus.APPROVED:  # the ledger is asked before it is settled
                recorded = self.sim.recorded(confirmed.call, write_key)
                if recorded is not None:  # a reset undid the decision of a write that ran
                    record_recorded(self.state, confirmed, recorded)
                    self.notify(replies.made_earlier(confirmed.detail, None if recorded.ok else recorded.result))
                    self.claims.append(("done" if recorded.ok else "not_done", effect, self.told[-1]))
                    continue
            if approval.status is ApprovalStatus.APPROVED:
                if self.cancel is not None:
                    self.settling = []  # ``execute_confirmed`` raises Interrupted before the write starts
                    return
                self.start_write(confirmed, "approval", approval.approver)
            elif approval.status is ApprovalStatus.REJECTED:
                reason = f"a supervisor rejected it ({approval.approver})"
                tr.decline(self.state, confirmed, Rule.APPROVAL_REJECTED.value, f"{reason}: {confirmed.detail}")
                self.notify(replies.approval_rejected(confirmed.detail))
                self.claims.append(("not_done", effect, self.told[-1]))
            else:
                tr.finish_step(self.state, confirmed.operation_id, StepStatus.FAILED,
                               "the approval expired undecided; handed to a human agent")
                self.sim.ticket(keys.approval_expiry_ticket_key(write_key), expiry_ticket_summary(approval))
                self.notify(replies.approval_expired(confirmed.detail))
                self.claims.append(("not_done", effect, self.told[-1]))

    # --- a cancel (``cancellation.cancel_conversation`` and ``compensation.roll_back``) ----
    def request_cancel(self, request: CancelRequest) -> None:
        """The ``cancel`` signal: a model call or read stops at once; a write in flight is awaited."""
        if self.cancel is None:
            self.cancel = request
            tr.request_cancel(self.state)
        if self.in_flight is None:
            self.run_cancel()

    def run_cancel(self) -> None:
        state = self.state
        if not state.is_open():
            return
        not_undone: list[str] = []
        if self.cancel.rollback:
            not_undone = self._roll_back()
            if not_undone:
                self.sim.ticket(keys.rollback_ticket_key(state.conversation_id), "; ".join(not_undone))
        tr.close(state, ConversationStatus.CANCELLED, self.cancel.reason)
        self.turn_open = False
        text = summary(state, not_undone)
        self.said.append(" ".join([*self.told, text]))
        self.told = []
        ops = {op.operation_id: op for op in state.completed_operations}
        said = {StepStatus.DONE: "done", StepStatus.COMPENSATED: "undone", StepStatus.FAILED: "not_done",
                StepStatus.CANCELLED: "not_done"}
        for step in state.steps:
            done = ops.get(step.operation_id)
            key = identity(done.idempotency_key, done.arguments) if done else self.key_of(step.operation_id)
            claim = "done" if step.detail in not_undone else said.get(step.status)
            if key is not None and claim is not None and not (step.error or "").endswith("escalated to a human agent"):
                self.claims.append((claim, key, text))

    def key_of(self, operation: Optional[str]) -> Optional[str]:
        """The effect identity of a confirmed operation, if it was confirmed."""
        return next((effect for op, _, effect in self.confirmed if op == operation), None)

    def _roll_back(self) -> list[str]:
        trouble = []
        for op in reversed(self.state.completed_operations):
            spec = spec_of(op.tool)
            if not op.ok or op.compensated or spec.tool_class is not ToolClass.REVERSIBLE_WRITE:
                continue
            detail = next((s.detail for s in self.state.steps if s.operation_id == op.operation_id), op.tool)
            if op.undo_arguments is None or spec.compensation is None:
                trouble.append(detail)
                continue
            self.sim.tag = "compensation"
            doc = self.sim.document(spec.subject, op.arguments[spec.subject])
            self.sim.tag = ""
            current = doc.get(spec.compensation_from or "") if doc else None
            if not isinstance(current, dict) or any(current.get(k) != v for k, v in op.arguments.items()
                                                    if k in current):
                trouble.append(detail)
                continue
            call = make_tool_call(spec.compensation, op.undo_arguments)
            self.sim.tag = "compensation"
            result = self.sim.write(call, keys.idempotency_key(call, keys.compensation_operation(op.operation_id)))
            self.sim.tag = ""
            if result.ok:
                op.compensated = True
                tr.finish_step(self.state, op.operation_id, StepStatus.COMPENSATED, "undone")
            else:
                trouble.append(detail)
        return trouble

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
