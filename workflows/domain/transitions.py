"""Pure state transitions: every change the workflows make to the conversation state, and
the events that say what happened.

The workflow calls these and never assigns to the state itself; they never do I/O. They
alone set the conversation's ``Phase`` (``state.phase``): open, awaiting confirmation,
awaiting approval, closing, awaiting resolution, closed.

Each step of a turn is one transition that records a typed ``Event`` (a message received, a
proposal rejected or superseded, a write shown, confirmed, declined, started or done, a read
run, a reply said, the conversation closed, ...) through ``state.emit``: in workflow memory,
never in the saved state. The workflow consumes them in one place (``SupportWorkflow._record``:
the journal's rows and the operators' view); with no subscriber they go nowhere.

Tool results are the system's strings (JSON text, a plain value, or ``"Error: ..."``);
each tool's ``fold`` (``workflows.domain.catalogue``) parses a successful one into typed facts,
so the model's next snapshot reflects the system of record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Optional

from workflows.domain.actions import call_arguments, call_digest
from workflows.domain.catalogue import spec_of
from workflows.domain.contracts import ModelResult, Outcome, ToolResult
from workflows.domain.facts import extract_facts, merge_facts
from workflows.domain.journal import EntryKind
from workflows.domain.policy.approvals import Approval, ApprovalDecision, ApprovalStatus, apply_decision, expire
from workflows.domain.policy.clauses import Rule
from workflows.domain.records import OPERATIONS_KEPT
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


# --- events -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Event:
    """What a transition did, for the journal and the operators' view (workflow memory only)."""

    refreshes_view: ClassVar[bool] = True
    """Whether the operators' view is published on it. False for events noted for the journal
    alone where the view was never published: publishing there could upsert a search attribute
    earlier than the released code did, a command out of its recorded place on replay."""


@dataclass(frozen=True)
class RunStarted(Event):
    """A run started serving the conversation (first thing, also after continue-as-new)."""


@dataclass(frozen=True)
class MessageReceived(Event):
    """User turn ``turn`` began with ``text`` (the client's message id: ``message_id``)."""

    turn: int
    text: str
    message_id: Optional[str]


@dataclass(frozen=True)
class MessageRefused(Event):
    """A message queued behind the end of the conversation, answered ``reply`` (that it is over)."""

    text: str
    message_id: Optional[str]
    reply: str


@dataclass(frozen=True)
class ModelAsked(Event):
    """The model is asked for the next action of user turn ``turn`` (the call is under way)."""

    turn: int


@dataclass(frozen=True)
class ModelAnswered(Event):
    """The model call answered; ``written_reply``: the reply its activity wrote to the journal
    with the turn's record so far (``ModelResult.journaled``), else None."""

    written_reply: Optional[str]


@dataclass(frozen=True)
class ModelCallCancelled(Event):
    """A cancel stopped the model call in flight."""


@dataclass(frozen=True)
class ModelFailed(Event):
    """The model call gave no usable proposal (malformed output, or the call failed)."""

    rule: str
    reason: str


@dataclass(frozen=True)
class ModelTroubleTurn(Event):
    """A user turn ended without a usable proposal from the model (``turns``: how many in a row)."""

    turns: int


@dataclass(frozen=True)
class ConfirmationAskedAgain(Event):
    """The user's answer to the shown write looked like a yes or a no without being one: the
    write stays shown and the user is asked again."""

    operation_id: str


@dataclass(frozen=True)
class BudgetRefused(Event):
    """The model activity refused the call: it would pass the token budget (hand-over next)."""

    reason: str


@dataclass(frozen=True)
class ProposalRejected(Event):
    """The policy refused the model's proposal."""

    rule: str
    reason: str


@dataclass(frozen=True)
class ProposalSuperseded(Event):
    """The proposal was discarded: a newer user message arrived while it was being proposed."""

    rule: str
    reason: str


@dataclass(frozen=True)
class ReplyAccepted(Event):
    """The model's reply was accepted; it ends the turn."""


@dataclass(frozen=True)
class EndAccepted(Event):
    """The model's end of the conversation was accepted."""


@dataclass(frozen=True)
class TransferAccepted(Event):
    """The model's transfer to a human agent was accepted (its ticket is opened next)."""


@dataclass(frozen=True)
class ReadRan(Event):
    """An accepted read ran; ``outcome``: applied or refused (a business error). ``by_model``:
    the model proposed it alone (False: a state-driven read, or one read of a batch)."""

    outcome: Outcome
    by_model: bool = True


@dataclass(frozen=True)
class ReadFailed(Event):
    """An accepted read's retries ran out: its outcome is unknown (``by_model`` as in ``ReadRan``)."""

    rule: str
    reason: str
    by_model: bool = True


@dataclass(frozen=True)
class BatchJudged(Event):
    """A batch of tool calls from one model answer was judged and its reads ran: ``ran`` reads,
    ``refused`` calls, and whether a read's system could not answer (``unavailable``)."""

    ran: int
    refused: int
    unavailable: bool


@dataclass(frozen=True)
class ReadCancelled(Event):
    """A cancel stopped the accepted read in flight (``by_model`` as in ``ReadRan``)."""

    by_model: bool = True


@dataclass(frozen=True)
class WriteShown(Event):
    """An accepted write was shown for confirmation (its operation id minted)."""

    operation_id: str


@dataclass(frozen=True)
class WriteAwaitingApproval(Event):
    """The user confirmed the write; it waits for a supervisor's decision."""

    operation_id: str
    approval_id: str


@dataclass(frozen=True)
class WriteDeclined(Event):
    """The shown write will not run: the user said no or moved on, its confirmation failed the
    policy, a supervisor rejected it, or its approval expired (``rule`` says which)."""

    operation_id: str
    rule: str
    reason: str


@dataclass(frozen=True)
class WriteStarted(Event):
    """A confirmed write is running (its step ``running``)."""

    operation_id: str


@dataclass(frozen=True)
class WriteDone(Event):
    """A confirmed write's outcome: applied or refused as the system of record said, or unknown
    (escalated). ``result``: the refusal or the escalation's reason (None when applied)."""

    operation_id: str
    outcome: Outcome
    result: Optional[str]


@dataclass(frozen=True)
class WriteCancelled(Event):
    """A cancel stopped a confirmed write before it started: it never ran."""

    operation_id: str
    reason: str


@dataclass(frozen=True)
class WriteCompensated(Event):
    """The applied reversible write ``operation_id`` was undone by its compensation (a rollback)."""

    refreshes_view: ClassVar[bool] = False
    operation_id: str


@dataclass(frozen=True)
class TicketOpened(Event):
    """A human-agent ticket is open under ``ticket_key`` (``keys``: a transfer, an escalation,
    an expired approval, a rollback), about the write ``operation_id`` when there is one."""

    refreshes_view: ClassVar[bool] = False
    ticket_key: str
    operation_id: Optional[str] = None


@dataclass(frozen=True)
class AwaitingResolution(Event):
    """The escalated conversation waits for an operator to resolve its unknown outcome."""


@dataclass(frozen=True)
class Said(Event):
    """The user was shown ``text``: a reply (``kind`` reply), something told outside a turn
    (notice), or the cancellation's summary (cancellation)."""

    text: str
    kind: EntryKind


@dataclass(frozen=True)
class Closed(Event):
    """The conversation closed with ``status`` for ``reason``; ``unrun``: the operation ids of
    the writes it dropped (shown, or confirmed and awaiting a supervisor), which will not run."""

    status: ConversationStatus
    reason: str
    unrun: tuple[str, ...]


def is_error(result: str) -> bool:
    """A retail tool signals a business refusal with a result starting with ``Error``."""
    return result.startswith("Error")


def add_turn(state: ConversationState, role: Role, text: str) -> None:
    """Append a turn to the bounded window (older turns drop; pinned facts stay)."""
    state.recent_turns.append(Turn(turn=state.turn, role=role, text=text))
    del state.recent_turns[:-RECENT_TURNS_KEPT]


def receive_user_message(state: ConversationState, text: str, message_id: Optional[str] = None) -> None:
    """Start a new user turn: count it, keep it in the window, pin its facts (``message_id``:
    the client's, for the transcript)."""
    state.turn += 1
    add_turn(state, Role.USER, text)
    state.pinned_facts = merge_facts(state.pinned_facts, extract_facts(text, state.turn))
    state.emit(MessageReceived(turn=state.turn, text=text, message_id=message_id))


def refuse_message(state: ConversationState, text: str, message_id: Optional[str], reply: str) -> None:
    """A message queued behind the end of the conversation is answered ``reply`` (not a turn)."""
    state.emit(MessageRefused(text=text, message_id=message_id, reply=reply))


def say(state: ConversationState, text: str, kind: EntryKind) -> None:
    """The user is shown ``text`` (``kind``: a reply, a notice, the cancellation's summary): an
    assistant turn in the window."""
    add_turn(state, Role.ASSISTANT, text)
    state.emit(Said(text=text, kind=kind))


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


# --- the model's proposals ----------------------------------------------------------------


def ask_model(state: ConversationState) -> None:
    """The model is asked for the next action of the current turn."""
    state.emit(ModelAsked(turn=state.turn))


def model_answered(state: ConversationState, result: ModelResult) -> None:
    """Count the model call's tokens (``record_usage``); a reply its activity wrote to the
    journal is noted with it."""
    record_usage(state, result.model, result.input_tokens, result.output_tokens,
                 result.cache_read_input_tokens, result.cache_creation_input_tokens)
    written = result.action.text if result.journaled and result.action.kind == "reply" else None
    state.emit(ModelAnswered(written_reply=written))


def model_call_cancelled(state: ConversationState) -> None:
    """A cancel stopped the model call in flight (nothing is recorded in the state)."""
    state.emit(ModelCallCancelled())


def model_failed(state: ConversationState, reason: str) -> Rejection:
    """The model call gave no usable proposal: recorded as a malformed-output rejection."""
    rejection = reject(state, Rule.MALFORMED_OUTPUT.value, reason)
    state.emit(ModelFailed(rule=rejection.rule, reason=rejection.reason))
    return rejection


def model_trouble_turn(state: ConversationState) -> int:
    """The user turn ends without a usable proposal from the model; returns the turns in a row."""
    state.model_trouble_turns += 1
    state.emit(ModelTroubleTurn(turns=state.model_trouble_turns))
    return state.model_trouble_turns


def model_served(state: ConversationState) -> None:
    """The user turn ended with a usable proposal: the count of trouble turns starts again."""
    state.model_trouble_turns = 0


def budget_refused(state: ConversationState, reason: str) -> None:
    """The model activity refused the call for the token budget (the hand-over follows)."""
    state.emit(BudgetRefused(reason=reason))


def reject_proposal(state: ConversationState, rule: str, reason: str, proposal: dict[str, Any]) -> None:
    """The policy refused ``proposal`` (``reject``)."""
    reject(state, rule, reason, proposal)
    state.emit(ProposalRejected(rule=rule, reason=reason))


def supersede(state: ConversationState, reason: str, proposal: dict[str, Any]) -> None:
    """``proposal`` is discarded: a newer user message arrived while it was being proposed."""
    reject(state, Rule.SUPERSEDED.value, reason, proposal)
    state.emit(ProposalSuperseded(rule=Rule.SUPERSEDED.value, reason=reason))


def accept_reply(state: ConversationState) -> None:
    """The model's reply is accepted: it ends the turn."""
    state.emit(ReplyAccepted())


def end(state: ConversationState) -> None:
    """The model's end of the conversation is accepted: the conversation ends."""
    state.emit(EndAccepted())
    close(state, ConversationStatus.ENDED, "ended by the assistant")


def accept_transfer(state: ConversationState) -> None:
    """The model's transfer to a human agent is accepted (its ticket is opened next; ``close``
    transferred once it is)."""
    state.emit(TransferAccepted())


def read_ran(state: ConversationState, call: Any, result: ToolResult, by_model: bool = True) -> str:
    """An accepted read answered: its result is folded into the state (``apply_read_result``).
    ``by_model`` False: the model did not propose it alone (a state-driven read, or a batch's)."""
    shown = apply_read_result(state, call, result.result)
    state.emit(ReadRan(outcome=result.outcome, by_model=by_model))
    return shown


def read_failed(state: ConversationState, call: Any, reason: str, by_model: bool = True) -> None:
    """An accepted read's retries ran out (e.g. the database is down): a tool-error rejection."""
    rejection = reject(state, Rule.TOOL_ERROR.value, f"{call.name} failed: {reason}", proposal_of(call))
    state.emit(ReadFailed(rule=rejection.rule, reason=rejection.reason, by_model=by_model))


def batch_judged(state: ConversationState, ran: int, refused: int, unavailable: bool) -> None:
    """A batch's reads ran and its refusals are recorded (``workflows.conversation.batch``)."""
    state.emit(BatchJudged(ran=ran, refused=refused, unavailable=unavailable))


def read_cancelled(state: ConversationState, by_model: bool = True) -> None:
    """A cancel stopped the accepted read in flight (nothing is recorded in the state)."""
    state.emit(ReadCancelled(by_model=by_model))


# --- steps and writes -----------------------------------------------------------------------


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
    state.emit(WriteShown(operation_id=operation_id))
    return pending


def await_approval(state: ConversationState, confirmed: PendingConfirmation, approval: Approval) -> None:
    """A confirmed write needs a supervisor: keep it, record its approval, mark its step."""
    state.approvals.append(approval)
    state.awaiting_approval.append(confirmed)
    finish_step(state, confirmed.operation_id, StepStatus.AWAITING_APPROVAL)
    if state.phase in (Phase.OPEN, Phase.AWAITING_CONFIRMATION):
        state.phase = Phase.AWAITING_APPROVAL
    state.emit(WriteAwaitingApproval(operation_id=confirmed.operation_id, approval_id=approval.approval_id))


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


def decided_writes(state: ConversationState) -> list[tuple[PendingConfirmation, Approval]]:
    """The confirmed writes whose approval is no longer pending, each with its approval
    (decided or expired), oldest first. They stay awaiting until each is settled
    (``take_awaiting``): a close meanwhile withdraws the rest."""
    by_operation = {a.operation_id: a for a in state.approvals}
    return [(c, by_operation[c.operation_id]) for c in state.awaiting_approval
            if by_operation[c.operation_id].status is not ApprovalStatus.PENDING]


def take_awaiting(state: ConversationState, confirmed: PendingConfirmation) -> None:
    """``confirmed`` no longer awaits a supervisor: it is settled now."""
    state.awaiting_approval = [c for c in state.awaiting_approval if c.operation_id != confirmed.operation_id]


def note_ran_earlier(approval: Approval, note: str) -> None:
    """The ledger found the write of a rejected or expired approval applied (a reset undid its
    decision): ``note`` joins the supervisor's own (the audit keeps both)."""
    approval.note = "; ".join(filter(None, [approval.note, note]))


def take_pending(state: ConversationState) -> Optional[PendingConfirmation]:
    """Remove and return the pending confirmation: the user's next message answers it."""
    pending, state.pending_confirmation = state.pending_confirmation, None
    if state.phase is Phase.AWAITING_CONFIRMATION:
        state.phase = Phase.OPEN
    return pending


def ask_again(state: ConversationState, pending: PendingConfirmation) -> None:
    """The user's answer to ``pending`` was unclear: it is shown again and awaits a yes or a no."""
    state.pending_confirmation = pending
    if state.phase is Phase.OPEN:
        state.phase = Phase.AWAITING_CONFIRMATION
    state.emit(ConfirmationAskedAgain(operation_id=pending.operation_id))


def decline(state: ConversationState, pending: PendingConfirmation, rule: str, reason: str,
            quote_detail: bool = False) -> None:
    """The pending write will not run: cancel its step and record why for the model (the
    reason followed by the write's detail when ``quote_detail``)."""
    recorded = f"{reason}: {pending.detail}" if quote_detail else reason
    finish_step(state, pending.operation_id, StepStatus.CANCELLED, recorded)
    reject(state, rule, recorded, proposal_of(pending.call))
    state.emit(WriteDeclined(operation_id=pending.operation_id, rule=rule, reason=reason))


def fail_write(state: ConversationState, confirmed: PendingConfirmation, rule: str, reason: str) -> None:
    """The confirmed write will not run here (its approval expired, it is with a human agent):
    its step fails with ``reason``."""
    finish_step(state, confirmed.operation_id, StepStatus.FAILED, reason)
    state.emit(WriteDeclined(operation_id=confirmed.operation_id, rule=rule, reason=reason))


def start_write(state: ConversationState, confirmed: PendingConfirmation) -> None:
    """The confirmed write starts: its step is running."""
    finish_step(state, confirmed.operation_id, StepStatus.RUNNING)
    state.emit(WriteStarted(operation_id=confirmed.operation_id))


def write_not_started(state: ConversationState, confirmed: PendingConfirmation) -> None:
    """A cancel stopped the confirmed write before it started (the cancel path closes its step)."""
    state.emit(WriteCancelled(operation_id=confirmed.operation_id, reason="cancelled before it ran"))


def outcome_unknown(state: ConversationState, confirmed: PendingConfirmation, reason: str) -> None:
    """The confirmed write ran, but whether it took effect could not be shown: its step is
    ``unknown`` (never replayed; a human checks it: ``escalate``)."""
    finish_step(state, confirmed.operation_id, StepStatus.UNKNOWN, reason)


def escalate(state: ConversationState, confirmed: PendingConfirmation, reason: str) -> None:
    """The conversation closes escalated for ``reason``: the outcome of ``confirmed`` is
    unknown (``outcome_unknown``) and a human checks it."""
    close(state, ConversationStatus.ESCALATED, reason)
    state.emit(WriteDone(operation_id=confirmed.operation_id, outcome=Outcome.UNKNOWN, result=reason))


def close(state: ConversationState, status: ConversationStatus, reason: str) -> None:
    """End the conversation: drop the pending confirmation, withdraw pending approvals and
    approved ones whose write has not run, cancel unfinished steps."""
    dropped = tuple(c.operation_id for c in [*([state.pending_confirmation] if state.pending_confirmation else []),
                                             *state.awaiting_approval])
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
    state.emit(Closed(status=status, reason=reason, unrun=dropped))


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
    state.emit(AwaitingResolution())
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
    state.emit(RunStarted())


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
    del state.completed_operations[:-OPERATIONS_KEPT]
    fold = spec_of(call.name).fold
    if ok and fold is not None:
        fold(state, args, result)
    finish_step(state, operation_id, StepStatus.DONE if ok else StepStatus.FAILED, None if ok else result)
    if not ok:
        reject(state, Rule.TOOL_ERROR.value, result, proposal_of(call))
    state.emit(WriteDone(operation_id=operation_id, outcome=Outcome.APPLIED if ok else Outcome.REFUSED,
                         result=None if ok else result))


def apply_compensation_result(state: ConversationState, call: Any, result: str) -> None:
    """Fold the facts an applied compensation (the undo of a reversible write) returns."""
    fold = spec_of(call.name).fold
    if fold is not None:
        fold(state, call_arguments(call), result)


def compensated(state: ConversationState, op: CompletedOperation) -> None:
    """``op`` was undone by its compensation (a rollback the user asked for)."""
    op.compensated = True
    finish_step(state, op.operation_id, StepStatus.COMPENSATED, "undone: the user asked for a rollback")
    state.emit(WriteCompensated(operation_id=op.operation_id))


def ticket_opened(state: ConversationState, ticket_key: str, operation_id: Optional[str] = None) -> None:
    """A human-agent ticket is open under ``ticket_key`` (newly, or held since an earlier run)."""
    state.emit(TicketOpened(ticket_key=ticket_key, operation_id=operation_id))


def reset_seen(state: ConversationState, epoch: str) -> None:
    """The run passed a reset point (its random seed changed to one whose epoch is ``epoch``):
    the events noted from now on are new facts, with new ids (``workflows.domain.journal``).
    Records no event: it is called while Temporal applies the new seed, before any workflow
    code of that task runs, where nothing else may happen."""
    state.reset_epoch = epoch


def proposal_of(call: Any) -> dict[str, Any]:
    """A tool call as the proposal dict recorded with a rejection."""
    return {"kind": "tool_call", "tool": {"name": call.name, "arguments": call_arguments(call)}}
