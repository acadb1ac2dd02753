"""One user turn: answer a pending confirmation, then propose → validate → apply until
the model replies, a write awaits confirmation, the conversation closes, or a cancel
stops it (``run_turn`` then returns None and the cancel path takes over).

The model is a stateless processor: each proposal is one activity over a snapshot
rendered from the state. The policy validates it; reads run at once; a write is only
shown here (its exact detail), and runs in a later turn after the user's yes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from temporalio import workflow
from temporalio.exceptions import ActivityError

from workflows.conversation import budget

from workflows.domain import keys, replies
from workflows.domain import transitions as tr
from workflows.activity_api import ModelActivitiesApi
from workflows.conversation.approvals import handed_over, record_recorded, recorded_before_approval, request_approval
from workflows.domain.policy.approvals import ApprovalPolicy
from workflows.domain.policy.clauses import Rule
from workflows.domain.policy.confirm import describe, is_no, is_yes
from workflows.domain.catalogue import spec_of
from workflows.domain.contracts import CancelRequest, ModelRequest, ModelResult, Outcome
from workflows.conversation.execute import TRUTHFUL_TRANSFER_PATCH, execute_confirmed, failure_reason, open_ticket, read
from workflows.failures import MODEL
from workflows.interrupts import Interrupted, cancellable, local_failure_as_activity_error, start_local_or_activity
from workflows.domain.journal import Verdict
from workflows.conversation.journal import JournalLog
from workflows.options import (
    LOCAL_MODEL_CALLS_PATCH,
    MAX_CONSECUTIVE_REJECTIONS,
    MAX_MODEL_STEPS_PER_TURN,
    MODEL_RETRY,
    MODEL_TIMEOUT,
)
from workflows.domain.policy.validator import handed_over_refusal, validate_execution, validate_proposal
from workflows.domain.prompt import PROMPT_VERSION, state_view
from workflows.domain.state import Confirmation, ConversationState, ConversationStatus
from workflows.visibility import Visibility


NO_WRITE_AFTER_HANDOVER_PATCH = "no-write-after-handover"
"""``workflow.patched`` id: a write proposed on an order whose earlier write went to a human agent
when its approval expired is refused (``policy.handed_over_refusal``). Without it, the user could ask
again and a supervisor approve a second write beside the human agent holding the ticket."""


@dataclass(frozen=True)
class Inbound:
    """A user message as accepted by the update, with the proposal (operation id and
    detail digest) awaiting confirmation at that moment: a yes confirms only what had
    been shown before the user sent it."""

    message_id: int
    text: str
    seen_operation_id: Optional[str] = None
    seen_digest: Optional[str] = None
    update_id: Optional[str] = None
    """The client's message id (the update's id), for the transcript."""


@dataclass
class TurnContext:
    """What a turn needs from its conversation: the state, the write timeout (seconds),
    the pending cancel request (if any), whether a newer user message is waiting, the
    operators' view, and the journal records of the turn (``call_seq`` of each model call,
    verdicts, transcript; workflow memory, not state)."""

    state: ConversationState
    write_timeout_seconds: float
    cancel_request: Callable[[], Optional[CancelRequest]]
    visibility: Visibility
    newer_message: Callable[[], bool] = lambda: False
    approvals: ApprovalPolicy = field(default_factory=ApprovalPolicy)
    journal: Optional[JournalLog] = None
    local_model_calls: bool = False
    """``SupportInput.local_model_calls``."""


async def run_turn(ctx: TurnContext, inbound: Inbound) -> Optional[str]:
    """Process one user message; returns the assistant's reply to it, or None when a
    cancel stopped the turn (what already ran is recorded in the state)."""
    try:
        return await _run_turn(ctx, inbound)
    except Interrupted:
        return None


async def _run_turn(ctx: TurnContext, inbound: Inbound) -> Optional[str]:
    state, journal = ctx.state, _journal(ctx)
    tr.receive_user_message(state, inbound.text)
    journal.user_message(state.turn, inbound.text, inbound.update_id)
    pending = tr.take_pending(state)
    if pending is not None:
        if is_yes(inbound.text):
            confirmation = Confirmation(operation_id=inbound.seen_operation_id or "",
                                        digest=inbound.seen_digest or "", turn=state.turn, verbatim=inbound.text)
            verdict = validate_execution(state, pending, confirmation)
            recorded = await recorded_before_approval(state, pending, ctx.approvals) if verdict.accepted else None
            if not verdict.accepted:
                tr.decline(state, pending, verdict.rule.value, verdict.reason)
                journal.write_verdict(pending, Verdict.DECLINED, verdict.rule.value, verdict.reason)
            elif recorded is not None:  # a reset re-executed this yes: the write ran, approved, in the first run
                record_recorded(state, pending, recorded)
                journal.write_done(state, pending)
                ctx.visibility.publish(state)
            elif await handed_over(state, pending, ctx.approvals, journal):  # its approval expired in a run before
                ctx.visibility.publish(state)
                return replies.already_handed_over(pending.detail)
            elif request_approval(state, pending, ctx.approvals, workflow.info().workflow_id,
                                  workflow.now()) is not None:
                journal.write_verdict(pending, Verdict.CONFIRMED, Rule.AWAITING_APPROVAL.value)
                ctx.visibility.publish(state)
                return replies.awaiting_approval(pending.detail)
            else:
                try:
                    ended = await execute_confirmed(state, pending, ctx.write_timeout_seconds, ctx.visibility,
                                                    ctx.cancel_request, approvals=ctx.approvals)
                except Interrupted:
                    journal.write_done(state, pending)  # cancelled before it ran
                    raise
                journal.write_done(state, pending)
                if ended is not None:
                    return ended
        else:
            declined = "the user declined" if is_no(inbound.text) else "the user changed the subject"
            tr.decline(state, pending, Rule.USER_DECLINED.value, f"{declined}: {pending.detail}")
            journal.write_verdict(pending, Verdict.DECLINED, Rule.USER_DECLINED.value, declined)
    return await _agent_loop(ctx)


def _journal(ctx: TurnContext) -> JournalLog:
    if ctx.journal is None:
        ctx.journal = JournalLog(ctx.state)
    return ctx.journal


async def _agent_loop(ctx: TurnContext) -> Optional[str]:
    state, journal = ctx.state, _journal(ctx)
    consecutive_rejections = 0
    for _ in range(MAX_MODEL_STEPS_PER_TURN):
        if ctx.cancel_request() is not None:
            return None
        try:
            if budget.over_budget(state) and budget.hand_over_allowed():
                raise budget.OverBudget()
            result = await _propose(ctx)
        except budget.OverBudget:
            return await budget.hand_over(state)
        if result is not None and ctx.newer_message() and not _is_read(result.action):
            # Interrupt rule (README, "Interrupts"): the user spoke again while the model was
            # thinking; a reply, a write to confirm, an end or a transfer proposed for the older
            # message is discarded and the newer message is answered with the whole state.
            reason = "a newer user message arrived while this was being proposed"
            tr.reject(state, Rule.SUPERSEDED.value, reason, result.action.model_dump(mode="json"))
            journal.call_verdict(Verdict.SUPERSEDED, Rule.SUPERSEDED.value, reason)
            return replies.SUPERSEDED
        if result is None:
            consecutive_rejections += 1
        else:
            verdict = validate_proposal(state, result.action)
            handed = handed_over_refusal(state, result.action) if verdict.accepted else None
            if handed is not None and workflow.patched(NO_WRITE_AFTER_HANDOVER_PATCH):
                verdict = handed  # the human agent has that order's change: no second approval beside them
            if not verdict.accepted:
                tr.reject(state, verdict.rule.value, verdict.reason, result.action.model_dump(mode="json"))
                journal.call_verdict(Verdict.REJECTED, verdict.rule.value, verdict.reason)
                consecutive_rejections += 1
            else:
                consecutive_rejections = 0
                reply = await _apply(ctx, result.action, verdict.needs_confirmation)
                if reply is not None:
                    return reply
                continue
        if consecutive_rejections >= MAX_CONSECUTIVE_REJECTIONS:
            last = state.last_rejection()
            return replies.refused(last.rule if last else "")
    return replies.COULD_NOT_FINISH


def _is_read(action: Any) -> bool:
    return action.kind == "tool_call" and not spec_of(action.tool.name).is_write


async def _propose(ctx: TurnContext) -> Optional[ModelResult]:
    """One model call, cancelled if a cancel arrives meanwhile (raises ``Interrupted``)."""
    state, journal = ctx.state, _journal(ctx)
    ctx.visibility.publish(state, "model proposing the next action")
    call_seq = journal.next_call()
    record = journal.for_model(state)
    request = ModelRequest(conversation_id=state.conversation_id, turn=state.turn, call_seq=call_seq,
                           prompt_version=PROMPT_VERSION, view=state_view(state),
                           budget_remaining_tokens=budget.remaining_tokens(state), journal=record)
    # the patch too: a run an older worker began ignored the flag and scheduled activities
    handle = start_local_or_activity(
        ModelActivitiesApi.propose_action, request,
        local=ctx.local_model_calls and workflow.patched(LOCAL_MODEL_CALLS_PATCH),
        start_to_close_timeout=MODEL_TIMEOUT, retry_policy=MODEL_RETRY,
        summary=f"model proposes the next action (turn {state.turn})")
    try:
        result = await local_failure_as_activity_error(cancellable(handle, ctx.cancel_request), "propose_action")
    except Interrupted:
        journal.call_verdict(Verdict.CANCELLED, Rule.CANCELLED.value, "the model call was cancelled")
        raise
    except ActivityError as err:
        if budget.is_budget_refusal(err) and budget.hand_over_allowed():
            journal.call_verdict(Verdict.TRANSFERRED, "token-budget", budget.BUDGET_REASON)
            raise budget.OverBudget() from err
        # the type only: the message may quote model output, which may quote the user
        workflow.logger.warning("model call failed at turn %s: %s", state.turn, type(err.cause).__name__)
        rejection = tr.reject(state, Rule.MALFORMED_OUTPUT.value, f"model call failed: {failure_reason(err, MODEL)}")
        journal.call_verdict(Verdict.MALFORMED, rejection.rule, rejection.reason)
        return None
    tr.record_usage(state, result.model, result.input_tokens, result.output_tokens,
                    result.cache_read_input_tokens, result.cache_creation_input_tokens)
    if result.journaled and result.action.kind == "reply":
        journal.model_wrote(record, result.action.text)
    return result


async def _apply(ctx: TurnContext, action: Any, needs_confirmation: bool) -> Optional[str]:
    """Run an accepted action; returns the reply that ends the turn, or None to ask the
    model again. A write (``needs_confirmation``) is only shown, never run, here."""
    state, journal = ctx.state, _journal(ctx)
    if action.kind == "reply":
        journal.call_verdict(Verdict.REPLIED)
        return action.text
    if action.kind == "end":
        journal.call_verdict(Verdict.ENDED)
        tr.close(state, ConversationStatus.ENDED, "ended by the assistant")
        return action.text
    if action.kind == "transfer_to_human":
        journal.call_verdict(Verdict.TRANSFERRED)
        opened = await open_ticket(state, action.summary, keys.transfer_ticket_key(state.conversation_id, state.turn))
        if not opened and workflow.patched(TRUTHFUL_TRANSFER_PATCH):
            # no ticket, no transfer: the user is told so and the conversation goes on
            return replies.TRANSFER_FAILED
        tr.close(state, ConversationStatus.TRANSFERRED, "transferred to a human agent")
        return replies.TRANSFERRED
    call = action.tool
    if not needs_confirmation:
        try:
            result = await read(state, call, cancel_requested=ctx.cancel_request)
        except Interrupted:
            journal.call_verdict(Verdict.CANCELLED, Rule.CANCELLED.value, "the read was cancelled")
            raise
        except ActivityError as err:
            # retries are exhausted (e.g. the database is down): keep the state, tell the user
            rejection = tr.reject(state, Rule.TOOL_ERROR.value, f"{call.name} failed: {failure_reason(err)}",
                                  tr.proposal_of(call))
            journal.call_verdict(Verdict.READ_RAN, rejection.rule, rejection.reason, Outcome.UNKNOWN)
            return replies.SYSTEM_UNAVAILABLE
        tr.apply_read_result(state, call, result.result)
        journal.call_verdict(Verdict.READ_RAN, outcome=result.outcome)
        return None
    operation = keys.operation_id(state.conversation_id, state.turn)
    journal.call_verdict(Verdict.SHOWN)
    tr.await_confirmation(state, operation, call, describe(state, call))
    ctx.visibility.publish(state)
    return replies.confirmation_prompt(state.pending_confirmation.detail)
