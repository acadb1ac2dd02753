"""One user turn: answer a pending confirmation, then propose → validate → apply until
the model replies, a write awaits confirmation, the conversation closes, or a cancel
stops it (``Turn.run`` then returns None and the cancel path takes over).

The model is a stateless processor: each proposal is one activity over a snapshot
rendered from the state. The policy validates it; reads run at once; a write is only
shown here (its exact detail), and runs in a later turn after the user's yes.

Every step is a transition (``workflows.domain.transitions``) that records what happened;
the workflow turns those events into the journal's rows and the operators' view.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional

from temporalio import workflow
from temporalio.exceptions import ActivityError

from workflows.activity_api import ModelActivitiesApi
from workflows.conversation import budget
from workflows.conversation.approvals import needs_approval, request_supervisor
from workflows.conversation.batch import run_batch
from workflows.conversation.execute import execute_confirmed, failure_reason, open_ticket, read
from workflows.conversation.journal import JournalLog
from workflows.conversation.model_trouble import MODEL_TROUBLE_PATCH, after_turn
from workflows.conversation.state_reads import (MAX_STATE_DRIVEN_READS_PER_TURN, MEMORY_READS_PATCH,
                                               STATE_DRIVEN_READS_PATCH, run_due_reads)
from workflows.domain import keys, replies
from workflows.domain import transitions as tr
from workflows.domain.catalogue import spec_of
from workflows.domain.contracts import CancelRequest, ModelRequest, ModelResult
from workflows.domain.policy.approvals import ApprovalPolicy
from workflows.domain.policy.clauses import Rule
from workflows.domain.policy.confirm import Answer, answer_of, answer_of_1_0, describe
from workflows.domain.policy.validator import handed_over_refusal, validate_execution, validate_proposal
from workflows.domain.prompt import PROMPT_VERSION, PROMPT_VERSION_WITHOUT_MEMORY, state_view
from workflows.domain.state import Confirmation, ConversationState, ConversationStatus, PendingConfirmation, Phase
from workflows.domain.user_text import visible_text
from workflows.failures import MODEL
from workflows.interrupts import (CANCEL_WINS_PATCH, Interrupted, cancellable, local_failure_as_activity_error,
                                  see_cancel_after_local_result, start_local_or_activity)
from workflows.options import MAX_CONSECUTIVE_REJECTIONS, MAX_MODEL_STEPS_PER_TURN, MODEL_RETRY, MODEL_TIMEOUT


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
class Turn:
    """What a turn needs from its conversation: the state, the write timeout (seconds), the
    pending cancel request (if any), whether a newer user message is waiting, the approval
    policy, the journal (the ``call_seq`` and record so far each model call carries) and
    ``SupportInput.local_model_calls`` and ``SupportInput.memory``."""

    state: ConversationState
    write_timeout_seconds: float
    cancel_request: Callable[[], Optional[CancelRequest]]
    journal: JournalLog
    newer_message: Callable[[], bool] = lambda: False
    approvals: ApprovalPolicy = field(default_factory=ApprovalPolicy)
    local_model_calls: bool = False
    memory: bool = True
    _moved_on_from: Optional[str] = field(default=None, init=False)
    """The detail of the shown write this turn's message moved on from without a yes or a no."""
    _troubled: bool = field(default=False, init=False)
    """This turn ends without a usable proposal from the model."""

    async def run(self, inbound: Inbound) -> Optional[str]:
        """Process one user message; returns the assistant's reply to it, or None when a
        cancel stopped the turn (what already ran is recorded in the state)."""
        self._moved_on_from, self._troubled = None, False
        if workflow.patched(VISIBLE_TEXT_PATCH):
            inbound = replace(inbound, text=visible_text(inbound.text))  # what the user sees is what is read
        try:
            tr.receive_user_message(self.state, inbound.text, inbound.update_id)
            pending = tr.take_pending(self.state)
            reply = None if pending is None else await self._answer_pending(pending, inbound)
            if reply is None:
                reply = await self._agent_loop()
        except Interrupted:
            return None
        if reply is not None and self.state.is_open() and workflow.patched(MODEL_TROUBLE_PATCH):
            reply = await after_turn(self.state, reply, self._troubled)
        if reply is not None and self._moved_on_from is not None and self.state.is_open():
            # the user moved on from a write they were asked to confirm: say it was not made
            reply = f"{replies.not_made(self._moved_on_from)} {reply}"
        return reply

    # --- the user's answer to the write shown last turn ---------------------------------

    async def _answer_pending(self, pending: PendingConfirmation, inbound: Inbound) -> Optional[str]:
        """The message answers ``pending``: a yes runs it (or parks it for a supervisor), anything
        else declines it. Returns the reply that ends the turn, or None to ask the model."""
        state = self.state
        answer_rule = workflow.patched(CONFIRMATION_ANSWER_PATCH)
        answer = answer_of(inbound.text) if answer_rule else answer_of_1_0(inbound.text)
        if answer is Answer.UNCLEAR:
            tr.ask_again(state, pending)
            return replies.answer_yes_or_no(pending.detail)
        if answer is not Answer.YES:
            declined = "the user declined" if answer is Answer.NO else "the user changed the subject"
            tr.decline(state, pending, Rule.USER_DECLINED.value, declined, quote_detail=True)
            if answer is Answer.OTHER and answer_rule:
                self._moved_on_from = pending.detail
            return None
        confirmation = Confirmation(operation_id=inbound.seen_operation_id or "", digest=inbound.seen_digest or "",
                                    turn=state.turn, verbatim=inbound.text)
        verdict = validate_execution(state, pending, confirmation)
        if not verdict.accepted:
            tr.decline(state, pending, verdict.rule.value, verdict.reason)
            return None
        if needs_approval(state, pending, self.approvals):
            # parked for a supervisor, unless an earlier run already settled it (a reset re-executed this yes)
            return await request_supervisor(state, pending, self.approvals, workflow.info().workflow_id,
                                            workflow.now())
        ended = await execute_confirmed(state, pending, self.write_timeout_seconds, self.cancel_request,
                                        approvals=self.approvals)
        if ended is None and workflow.patched(WRITE_OUTCOME_REPLY_PATCH):
            return _told_outcome(state, pending)  # the write's outcome is in the state: no model call
        return ended

    # --- propose → validate → apply -------------------------------------------------------

    async def _agent_loop(self) -> Optional[str]:
        state = self.state
        consecutive_rejections = 0
        state_reads_left = MAX_STATE_DRIVEN_READS_PER_TURN
        tenant_cap = budget.TenantCap(state)
        for _ in range(MAX_MODEL_STEPS_PER_TURN):
            if state.phase is Phase.CLOSING:  # a cancel came: nothing new starts, the cancel path answers
                return None
            if workflow.patched(STATE_DRIVEN_READS_PATCH):
                # what the state alone calls for is read first, so the model's one call sees it
                # what is remembered is read after the profile, unless the conversation's memory is off
                memory = workflow.patched(MEMORY_READS_PATCH) and self.memory
                due = await run_due_reads(state, self.cancel_request, state_reads_left, memory)
                state_reads_left -= due.ran
                if due.unavailable:
                    return replies.SYSTEM_UNAVAILABLE  # recorded in the state: the next turn's model sees it
            try:
                if budget.over_budget(state):
                    raise budget.OverBudget()
                if await tenant_cap.spent():
                    return budget.TENANT_BUDGET_REPLY
                result = await self._propose()
            except budget.OverBudget:
                return await budget.hand_over(state)
            if result is not None and self.newer_message() and not _is_read(result.action):
                # Interrupt rule (README, "Interrupts"): the user spoke again while the model was
                # thinking; a reply, a write to confirm, an end or a transfer proposed for the older
                # message is discarded and the newer message is answered with the whole state.
                tr.supersede(state, "a newer user message arrived while this was being proposed",
                             result.action.model_dump(mode="json"))
                return replies.SUPERSEDED
            if result is None:
                consecutive_rejections += 1
            elif result.action.kind == "tool_calls":
                batch = await run_batch(state, result.action.tools, self.cancel_request)
                if batch.unavailable:
                    return replies.SYSTEM_UNAVAILABLE  # recorded in the state: the next turn's model sees it
                consecutive_rejections = 0 if batch.ran else consecutive_rejections + 1
            else:
                # the named-target clause judges writes; runs of 1.0.0 replay their writes without it
                named_target = _is_write(result.action) and workflow.patched(NAMED_TARGET_PATCH)
                verdict = validate_proposal(state, result.action, named_target=named_target)
                handed = handed_over_refusal(state, result.action) if verdict.accepted else None
                if handed is not None:
                    verdict = handed  # the human agent has that order's change: no second approval beside them
                if not verdict.accepted:
                    tr.reject_proposal(state, verdict.rule.value, verdict.reason, result.action.model_dump(mode="json"))
                    consecutive_rejections += 1
                else:
                    consecutive_rejections = 0
                    reply = await self._apply(result.action, verdict.needs_confirmation)
                    if reply is not None:
                        return reply
                    continue
            if consecutive_rejections >= MAX_CONSECUTIVE_REJECTIONS:
                last = state.last_rejection()
                self._troubled = last is not None and last.rule == Rule.MALFORMED_OUTPUT.value
                return replies.refused(last.rule if last else "")
        self._troubled = True
        return replies.COULD_NOT_FINISH

    async def _propose(self) -> Optional[ModelResult]:
        """One model call, cancelled if a cancel arrives meanwhile (raises ``Interrupted``)."""
        state = self.state
        tr.ask_model(state)
        call_seq, record = self.journal.for_model(state)
        request = ModelRequest(conversation_id=state.conversation_id, turn=state.turn, call_seq=call_seq,
                               prompt_version=PROMPT_VERSION if self.memory else PROMPT_VERSION_WITHOUT_MEMORY,
                               view=state_view(state),
                               budget_remaining_tokens=budget.remaining_tokens(state), journal=record)
        handle = start_local_or_activity(
            ModelActivitiesApi.propose_action, request, local=self.local_model_calls,
            start_to_close_timeout=MODEL_TIMEOUT, retry_policy=MODEL_RETRY,
            summary=f"model proposes the next action (turn {state.turn})")
        try:
            result = await local_failure_as_activity_error(cancellable(handle, self.cancel_request), "propose_action")
            if (self.local_model_calls and result.action.kind in ("transfer_to_human", "end")
                    and workflow.patched(CANCEL_WINS_PATCH)):
                await see_cancel_after_local_result(self.cancel_request)
        except Interrupted:
            tr.model_call_cancelled(state)
            raise
        except ActivityError as err:
            if budget.is_budget_refusal(err):
                tr.budget_refused(state, budget.BUDGET_REASON)
                raise budget.OverBudget() from err
            # the type only: the message may quote model output, which may quote the user
            workflow.logger.warning("model call failed at turn %s: %s", state.turn, type(err.cause).__name__)
            tr.model_failed(state, f"model call failed: {failure_reason(err, MODEL)}")
            return None
        tr.model_answered(state, result)
        return result

    async def _apply(self, action: Any, needs_confirmation: bool) -> Optional[str]:
        """Run an accepted action; returns the reply that ends the turn, or None to ask the
        model again. A write (``needs_confirmation``) is only shown, never run, here."""
        state = self.state
        if action.kind == "reply":
            tr.accept_reply(state)
            return action.text
        if action.kind == "end":
            tr.end(state)
            return action.text
        if action.kind == "transfer_to_human":
            tr.accept_transfer(state)
            opened = await open_ticket(state, action.summary, keys.transfer_ticket_key(state.conversation_id, state.turn))
            if not opened:
                # no ticket, no transfer: the user is told so and the conversation goes on
                return replies.TRANSFER_FAILED
            tr.close(state, ConversationStatus.TRANSFERRED, "transferred to a human agent")
            return replies.TRANSFERRED
        call = action.tool
        if needs_confirmation:
            pending = tr.await_confirmation(state, keys.operation_id(state.conversation_id, state.turn), call,
                                            describe(state, call))
            return replies.confirmation_prompt(pending.detail)
        try:
            result = await read(state, call, cancel_requested=self.cancel_request)
        except Interrupted:
            tr.read_cancelled(state)
            raise
        except ActivityError as err:
            # retries are exhausted (e.g. the database is down): keep the state, tell the user
            tr.read_failed(state, call, failure_reason(err))
            return replies.SYSTEM_UNAVAILABLE
        tr.read_ran(state, call, result)
        return None


VISIBLE_TEXT_PATCH = "visible-text"
"""``workflow.patched`` id: runs of 1.0.0 read a message with its invisible characters (docs/releasing.md)."""
CONFIRMATION_ANSWER_PATCH = "confirmation-answer"
"""``workflow.patched`` id: runs of 1.0.0 read a shown write's answer by the 1.0.0 rule ("ok" is a
yes, nothing is asked again) and do not say a write was not made (docs/releasing.md)."""
NAMED_TARGET_PATCH = "named-target"
"""``workflow.patched`` id: runs of 1.0.0 replay their write proposals without the named-target
clause (docs/releasing.md)."""
WRITE_OUTCOME_REPLY_PATCH = "write-outcome-reply"
"""``workflow.patched`` id: runs of 1.0.0 ask the model to word a write's outcome (docs/releasing.md)."""


def _told_outcome(state: ConversationState, pending: PendingConfirmation) -> str:
    """The reply to a confirmed write that reached the system of record, from its completed
    operation in the state (applied or refused) and the order it acted on: its new status when
    the write moved it on from the status the write requires."""
    op = next(op for op in reversed(state.completed_operations) if op.operation_id == pending.operation_id)
    order_id = op.arguments.get("order_id")
    order = state.orders.get(order_id) if order_id else None
    required = spec_of(op.tool).status
    # the order's status is told only when the write changed it (a credit leaves it "delivered")
    changed = order is not None and (required is None or order.status != required.status)
    return replies.write_outcome(pending.detail, None if op.ok else op.result, order_id,
                                 order.status if changed else None)


def _is_read(action: Any) -> bool:
    """A read, or a batch (whose writes are refused: only its reads run)."""
    return action.kind == "tool_calls" or (action.kind == "tool_call" and not spec_of(action.tool.name).is_write)


def _is_write(action: Any) -> bool:
    return action.kind == "tool_call" and spec_of(action.tool.name).is_write
