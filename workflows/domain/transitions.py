"""Pure state transitions: every change the workflows make to the conversation state.

The workflow calls these and never assigns to the state itself; they never do I/O. They
alone set the conversation's ``Phase`` (``state.phase``): open, awaiting confirmation,
awaiting approval, closing, awaiting resolution, closed.
Tool results are the system's strings (JSON text, a plain value, or ``"Error: ..."``);
each tool's ``fold`` (``workflows.domain.catalogue``) parses a successful one into typed facts,
so the model's next snapshot reflects the system of record.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from datetime import datetime

from workflows.domain.actions import call_arguments, call_digest
from workflows.domain.policy.approvals import Approval, ApprovalDecision, ApprovalStatus, apply_decision, expire
from workflows.domain.catalogue import spec_of
from workflows.domain.policy.clauses import Rule
from workflows.domain.facts import extract_facts, merge_facts
from workflows.domain.state import (
    OBSERVATIONS_KEPT,
    RECENT_TURNS_KEPT,
    REJECTIONS_KEPT,
    STEPS_KEPT,
    CompletedOperation,
    ConversationState,
    ConversationStatus,
    Observation,
    OutcomeResolution,
    PendingConfirmation,
    Phase,
    Rejection,
    Role,
    Step,
    StepStatus,
    Turn,
)


def is_error(result: str) -> bool:
    """A retail tool signals a business refusal with a result starting with ``Error``."""
    return result.startswith("Error")


def add_turn(state: ConversationState, role: Role, text: str) -> None:
    """Append a turn to the bounded window (older turns drop; pinned facts stay)."""
    state.recent_turns.append(Turn(turn=state.turn, role=role, text=text))
    del state.recent_turns[:-RECENT_TURNS_KEPT]


def receive_user_message(state: ConversationState, text: str) -> None:
    """Start a new user turn: count it, keep it in the window, pin its facts."""
    state.turn += 1
    add_turn(state, Role.USER, text)
    state.pinned_facts = merge_facts(state.pinned_facts, extract_facts(text, state.turn))


MAX_REJECTION_REASON_CHARS = 1000
MAX_REJECTED_PROPOSAL_CHARS = 4000
"""A rejection keeps at most this much of the refused proposal (its canonical JSON): the
state, carried through continue-as-new and rendered into every snapshot, stays bounded
whatever the model proposes."""


def reject(state: ConversationState, rule: str, reason: str, proposal: Optional[dict[str, Any]] = None) -> Rejection:
    """Record a refused proposal with its rule and reason (kept for audit and for the model).
    A proposal larger than ``MAX_REJECTED_PROPOSAL_CHARS`` is kept as its kind and a
    truncated JSON excerpt."""
    if proposal is not None:
        text = json.dumps(proposal, sort_keys=True)
        if len(text) > MAX_REJECTED_PROPOSAL_CHARS:
            proposal = {"kind": proposal.get("kind"), "truncated": text[:MAX_REJECTED_PROPOSAL_CHARS]}
    rejection = Rejection(turn=state.turn, rule=rule, reason=reason[:MAX_REJECTION_REASON_CHARS], proposal=proposal)
    state.rejections.append(rejection)
    del state.rejections[:-REJECTIONS_KEPT]
    return rejection


def start_step(state: ConversationState, step_id: str, name: str, detail: str,
               operation_id: Optional[str] = None) -> Step:
    """Add a pending business step (e.g. a write awaiting confirmation) at the current turn."""
    step = Step(step_id=step_id, name=name, status=StepStatus.PENDING, turn=state.turn,
                operation_id=operation_id, detail=detail)
    state.steps.append(step)
    if len(state.steps) > STEPS_KEPT:
        # drop the oldest finished steps; pending and running ones always stay
        finished = [s for s in state.steps if s.status not in (StepStatus.PENDING, StepStatus.RUNNING)]
        dropped = {id(s) for s in finished[: len(state.steps) - STEPS_KEPT]}
        state.steps = [s for s in state.steps if id(s) not in dropped]
    return step


def finish_step(state: ConversationState, step_id: str, status: StepStatus, error: Optional[str] = None) -> None:
    """Move step ``step_id`` to ``status`` (running, done, failed, cancelled), with the error if any."""
    for step in state.steps:
        if step.step_id == step_id:
            step.status = status
            step.error = error


def await_confirmation(state: ConversationState, operation_id: str, call: Any, detail: str) -> PendingConfirmation:
    """Show a validated write: it becomes the pending confirmation and a pending step."""
    pending = PendingConfirmation(operation_id=operation_id, call=call, detail=detail,
                                  digest=call_digest(call), proposed_turn=state.turn)
    state.pending_confirmation = pending
    start_step(state, operation_id, call.name, detail, operation_id=operation_id)
    if state.phase is Phase.OPEN:  # an approval awaited meanwhile stays the phase operators see
        state.phase = Phase.AWAITING_CONFIRMATION
    return pending


def await_approval(state: ConversationState, confirmed: PendingConfirmation, approval: Approval) -> None:
    """A confirmed write needs a supervisor: keep it, record its approval, mark its step."""
    state.approvals.append(approval)
    state.awaiting_approval.append(confirmed)
    finish_step(state, confirmed.operation_id, StepStatus.AWAITING_APPROVAL)
    if state.phase in (Phase.OPEN, Phase.AWAITING_CONFIRMATION):
        state.phase = Phase.AWAITING_APPROVAL


def decide_approval(state: ConversationState, approval: Approval, decision: ApprovalDecision, now: datetime) -> None:
    """A supervisor decided ``approval`` (checked by ``check_decision``): the main loop settles
    its write next."""
    apply_decision(approval, decision, now)
    _approvals_changed(state)


def expire_approvals(state: ConversationState, now: datetime) -> None:
    """Pending approvals whose time ran out at ``now`` expire (their writes are settled next)."""
    for approval in state.pending_approvals():
        if now >= approval.expires_at:
            expire(approval, now)
    _approvals_changed(state)


def _approvals_changed(state: ConversationState) -> None:
    # the phase leaves awaiting_approval with the last pending approval: back to what the user sees
    if state.phase is Phase.AWAITING_APPROVAL and not state.pending_approvals():
        state.phase = Phase.AWAITING_CONFIRMATION if state.pending_confirmation else Phase.OPEN


def take_settled(state: ConversationState) -> list[tuple[PendingConfirmation, Approval]]:
    """Remove and return the confirmed writes whose approval is no longer pending, each
    with its approval (decided or expired), oldest first."""
    by_operation = {a.operation_id: a for a in state.approvals}
    settled = [(c, by_operation[c.operation_id]) for c in state.awaiting_approval
               if by_operation[c.operation_id].status is not ApprovalStatus.PENDING]
    done = {c.operation_id for c, _ in settled}
    state.awaiting_approval = [c for c in state.awaiting_approval if c.operation_id not in done]
    return settled


def take_pending(state: ConversationState) -> Optional[PendingConfirmation]:
    """Remove and return the pending confirmation: the user's next message answers it."""
    pending, state.pending_confirmation = state.pending_confirmation, None
    if state.phase is Phase.AWAITING_CONFIRMATION:
        state.phase = Phase.OPEN
    return pending


def decline(state: ConversationState, pending: PendingConfirmation, rule: str, reason: str) -> None:
    """The pending write will not run: cancel its step and record why for the model."""
    finish_step(state, pending.operation_id, StepStatus.CANCELLED, reason)
    reject(state, rule, reason, proposal_of(pending.call))


def close(state: ConversationState, status: ConversationStatus, reason: str) -> None:
    """End the conversation: drop the pending confirmation, withdraw pending approvals and
    approved ones whose write has not run, cancel unfinished steps."""
    if state.pending_confirmation is not None:
        finish_step(state, state.pending_confirmation.operation_id, StepStatus.CANCELLED, reason)
        state.pending_confirmation = None
    for approval in state.pending_approvals():
        approval.status = ApprovalStatus.WITHDRAWN
        approval.note = reason
    unrun = {s.step_id for s in state.steps if s.status is StepStatus.AWAITING_APPROVAL}
    for approval in state.approvals:
        # approved, but its write never ran: an "approved" beside a cancelled step told
        # operators the write was on its way; the approver and the time stay on record
        if approval.status is ApprovalStatus.APPROVED and approval.operation_id in unrun:
            approval.status = ApprovalStatus.WITHDRAWN
            approval.note = f"{reason} (after approval{': ' + approval.note if approval.note else ''})"
    state.awaiting_approval = []
    for step in state.steps:
        if step.status in (StepStatus.PENDING, StepStatus.RUNNING, StepStatus.AWAITING_APPROVAL):
            finish_step(state, step.step_id, StepStatus.CANCELLED, reason)
    state.status = status
    state.ended_reason = reason
    state.phase = Phase.CLOSED


def request_cancel(state: ConversationState) -> None:
    """A cancel arrived: a serving conversation is closing (the cancel path closes it); one
    waiting for an operator's resolution stops waiting (it stays escalated); a closed or
    closing one is unchanged."""
    if state.phase.serving:
        state.phase = Phase.CLOSING
    elif state.phase is Phase.AWAITING_RESOLUTION:
        state.phase = Phase.CLOSED


def note_cancel(state: ConversationState, reason: str) -> None:
    """A cancel that arrived while the conversation escalated or was transferred: its reason
    joins ``ended_reason`` (the status stays: a human must check the write, or has the case)."""
    state.ended_reason = f"{state.ended_reason}; cancel requested meanwhile: {reason}"


def unresolved(state: ConversationState) -> list[Step]:
    """The state's steps whose outcome is unknown and not yet resolved."""
    return [s for s in state.steps if s.status is StepStatus.UNKNOWN]


def await_resolution(state: ConversationState) -> bool:
    """An escalated conversation with an unresolved unknown step starts waiting for an
    operator's resolution; False (nothing changes) for any other state."""
    if state.phase is not Phase.CLOSED or state.status is not ConversationStatus.ESCALATED or not unresolved(state):
        return False
    state.phase = Phase.AWAITING_RESOLUTION
    return True


def stop_awaiting_resolution(state: ConversationState) -> None:
    """The wait for an operator ran out: the conversation stays escalated and closes."""
    if state.phase is Phase.AWAITING_RESOLUTION:
        state.phase = Phase.CLOSED


def resolve_step(state: ConversationState, step: Step, resolution: OutcomeResolution) -> None:
    """An operator resolved ``step`` (its outcome was unknown): done or failed with their
    note, the resolution recorded, and the conversation open again when it was escalated and
    no unknown step is left."""
    applied = resolution.outcome == "applied"
    step.status = StepStatus.DONE if applied else StepStatus.FAILED
    step.error = None if applied else f"not applied, checked by operator {resolution.operator}: {resolution.note}"
    state.resolutions.append(resolution)
    if state.status is ConversationStatus.ESCALATED and not unresolved(state):
        state.status = ConversationStatus.ACTIVE
        state.ended_reason = None
        state.phase = Phase.OPEN


def start_run(state: ConversationState, token_budget: Optional[int]) -> None:
    """A run starts serving ``state``: it adopts the run's token budget (None: the state keeps
    what it carried over)."""
    if token_budget is not None:
        state.usage.budget_tokens = token_budget


def record_usage(state: ConversationState, model: str, input_tokens: int, output_tokens: int,
                 cache_read_input_tokens: int = 0, cache_creation_input_tokens: int = 0) -> None:
    """Count one model call and its tokens (uncached input, output, cache read, cache write)."""
    state.usage.model_calls += 1
    state.usage.input_tokens += input_tokens
    state.usage.output_tokens += output_tokens
    state.usage.cache_read_input_tokens += cache_read_input_tokens
    state.usage.cache_creation_input_tokens += cache_creation_input_tokens
    state.usage.model = model


def bind_system_of_record(state: ConversationState, result: Any) -> None:
    """Bind the conversation to the database that answered ``result`` (a ``ToolResult``),
    if it is not bound yet."""
    if state.system_of_record is None and getattr(result, "system_of_record", None):
        state.system_of_record = result.system_of_record


def apply_read_result(state: ConversationState, call: Any, result: str) -> str:
    """Fold a read tool's result into the state; returns the result as the model may
    see it (another customer's order is withheld: policy one-customer).

    The raw result is kept as an observation only when it was not folded into typed state
    (an error, a withheld order, a tool without a fold): a folded result is already in the
    customer, orders or products, and a raw copy would only repeat it in every prompt."""
    args = call_arguments(call)
    fold = spec_of(call.name).fold
    shown = result if is_error(result) or fold is None else fold(state, args, result)
    if fold is None or is_error(result) or is_error(shown):
        state.observations.append(Observation(tool=call.name, arguments=args, result=shown, turn=state.turn))
        del state.observations[:-OBSERVATIONS_KEPT]
    return shown


def apply_write_result(state: ConversationState, call: Any, operation_id: str, key: str,
                       result: str, ok: bool, child_workflow_id: Optional[str] = None,
                       undo_arguments: Optional[dict[str, Any]] = None) -> None:
    """Record a write that reached the system of record (with its compensation arguments,
    if reversible), fold the facts it returns, and finish its step (a refusal is also
    recorded as a rejection the model sees)."""
    args = call_arguments(call)
    state.completed_operations.append(
        CompletedOperation(operation_id=operation_id, idempotency_key=key, tool=call.name,
                           arguments=args, result=result, ok=ok, turn=state.turn,
                           child_workflow_id=child_workflow_id, undo_arguments=undo_arguments if ok else None)
    )
    fold = spec_of(call.name).fold
    if ok and fold is not None:
        fold(state, args, result)
    finish_step(state, operation_id, StepStatus.DONE if ok else StepStatus.FAILED, None if ok else result)
    if not ok:
        reject(state, Rule.TOOL_ERROR.value, result, proposal_of(call))


def proposal_of(call: Any) -> dict[str, Any]:
    """A tool call as the proposal dict recorded with a rejection."""
    return {"kind": "tool_call", "tool": {"name": call.name, "arguments": call_arguments(call)}}
