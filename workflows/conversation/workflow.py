"""``SupportWorkflow``: one durable customer conversation — its state, its message
handlers and its main loop, in that order.

Messages arrive by the ``send_message`` update, which returns the assistant's reply;
``cancel`` is a signal; ``open``, ``decide_approval`` and ``resolve_outcome`` are updates;
``state`` and ``answered_reply`` are queries. Handlers only enqueue or record: the main loop
processes one message at a time (``Turn``, ``workflows.conversation.turn``), so turns never
interleave and a message that arrives while an activity runs waits its turn, in order. The
state object, not the transcript, is the record; it carries over continue-as-new, and so
does a cancel. The state's ``phase`` (``workflows.domain.records.Phase``) says where the
conversation stands: the loop and the validators read it.

Every change to the state is a transition (``workflows.domain.transitions``) that records
an event of what happened; ``_record`` consumes them all, as they happen: the journal's rows
(``JournalLog``) and the operators' view (``Visibility``).

Temporal's own cancellation (the Web UI's "Request Cancellation") becomes the same cancel
as the signal: the main loop runs shielded from it, so a write in flight is awaited and
the cancel path (``workflows.conversation.cancellation``) runs; the run then ends as cancelled.
"""

from __future__ import annotations

import asyncio
from typing import Optional

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from workflows.conversation.answered import AnsweredReplies
from workflows.conversation.approvals import next_expiry, ready_to_settle, settle_approvals
from workflows.conversation.cancellation import cancel_conversation, escalated_with_cancel
from workflows.conversation.journal import JournalLog
from workflows.conversation.opening import (
    ConversationOpened,
    OpenConversation,
    store_known,
    unknown_store,
    unknown_store_reason,
)
from workflows.conversation.resolution import AWAITING_RESOLUTION_TEXT, ResolutionGate, ResolveOutcome
from workflows.conversation.turn import Inbound, Turn
from workflows.domain import replies
from workflows.domain import transitions as tr
from workflows.domain.contracts import (
    AssistantReply,
    CancelRequest,
    SupportInput,
    SupportOutcome,
    UserMessage,
    message_digest,
)
from workflows.domain.errors import ErrorType
from workflows.domain.journal import EntryKind, reset_epoch
from workflows.domain.migrations import initial_state
from workflows.domain.policy.approvals import Approval, ApprovalDecision, check_decision, check_decision_text
from workflows.domain.records import OutcomeResolution
from workflows.domain.state import ConversationState, Phase
from workflows.domain.user_text import message_problem
from workflows.interrupts import Interrupted
from workflows.options import TENANT
from workflows.visibility import Visibility, doing


FAILED_EVENT_PATCH = "failed-run-event"
"""``workflow.patched`` id of the journal write that records ``conversation.ended`` (failed) before
a run whose input state cannot be loaded fails."""


def support_workflow_id(conversation_id: str) -> str:
    """Workflow id of a conversation: one workflow per conversation id."""
    return f"support-{conversation_id}"


@workflow.defn
class SupportWorkflow:
    """Input ``SupportInput``; returns ``SupportOutcome`` when the conversation ends,
    is transferred, escalated or cancelled."""

    @workflow.init
    def __init__(self, inp: SupportInput) -> None:
        self._input = inp
        # the input state is JSON of any schema version: migrated here, or the run fails (``run``)
        self._state, self._unloadable = initial_state(inp.conversation_id, inp.store, inp.state)
        self._cancel: Optional[CancelRequest] = None
        carried = inp.cancel  # a cancel that arrived while the last run continued as new
        if carried is None and self._state.phase is Phase.CLOSING:
            # saved while a cancel was under way, resumed without it: the cancel goes on
            carried = CancelRequest(reason=replies.RESUMED_WHILE_CLOSING)
        if carried is not None:
            self._request_cancel(carried)
        self._inbox: list[Inbound] = []
        """Accepted messages, oldest first, waiting for the main loop."""
        self._next_message_id = 0
        self._replies: dict[int, AssistantReply] = {}
        """Replies by inbox message id, until the message's update returns them."""
        self._notices: list[str] = []
        """What the user was told outside a turn (approval outcomes, resolutions), not yet in a reply."""
        self._turns_this_run = 0
        self._answered = AnsweredReplies(inp.answered)
        """Replies by message id (update id), carried across continue-as-new."""
        # the tenant rides in the journal's records (an activity input: not compared on replay)
        self._journal = JournalLog(self._state, tenant=workflow.info().typed_search_attributes.get(TENANT))
        """The decision log's verdicts and the transcript of the turn in progress (memory only)."""
        self._visibility = Visibility()
        self._turn = Turn(state=self._state, write_timeout_seconds=inp.write_timeout_seconds,
                          cancel_request=self._cancel_request, journal=self._journal,
                          newer_message=lambda: bool(self._inbox), approvals=inp.approvals,
                          local_model_calls=inp.local_model_calls, memory=inp.memory)
        self._resolution = ResolutionGate(self._state, cancel_request=self._cancel_request, tell=self._tell,
                                          write_timeout_seconds=inp.write_timeout_seconds)
        self._state.subscribe(self._record)
        # a reset gives the run a new random seed at the reset point, and only there: the events
        # noted after it are new facts with new ids (``workflows.domain.journal``, resets)
        workflow.register_random_seed_callback(self._reset_seen)

    def _reset_seen(self, seed: int) -> None:
        """Temporal gave the run a new random seed: it passed a reset point."""
        tr.reset_seen(self._state, reset_epoch(seed))

    # --- message passing ------------------------------------------------------

    @workflow.update(description="Send one user message {text}; returns the assistant's reply. Use the client's "
                                 "message id as the update id: a retry returns the first reply.")
    async def send_message(self, message: UserMessage) -> AssistantReply:
        """Deliver one user message; returns the assistant's reply to it (the recorded reply
        when this message id was answered in an earlier run)."""
        recorded = self._answered.recorded()
        if recorded is not None:
            return recorded
        update_id = workflow.current_update_info().id
        self._next_message_id += 1
        message_id = self._next_message_id
        pending = self._state.pending_confirmation  # a yes confirms only what was shown before it was sent
        self._inbox.append(Inbound(message_id=message_id, text=message.text,
                                   seen_operation_id=pending.operation_id if pending else None,
                                   seen_digest=pending.digest if pending else None, update_id=update_id))
        await workflow.wait_condition(lambda: message_id in self._replies)
        reply = self._replies.pop(message_id)
        self._answered.remember(update_id, reply)
        return reply

    @send_message.validator
    def _validate_message(self, message: UserMessage) -> None:
        # A rejected update never enters history: the state stays exactly as it was.
        self._refuse_unloadable()
        if self._answered.recorded() is not None:
            # a retry of a message an earlier run answered (Temporal dedups within a run only)
            # gets its reply, as within its run, also while the conversation closes; accepting
            # it adds no command (the handler returns the recorded reply), so replay is unchanged
            return
        problem = message_problem(message.text)  # empty, a control character, over 8 KB
        if problem is not None:
            raise ApplicationError(problem, type=ErrorType.INVALID_MESSAGE.value, non_retryable=True)
        state = self._state
        if state.phase is Phase.CLOSING:
            raise ApplicationError(f"conversation {state.conversation_id} is being cancelled; "
                                   "start a new conversation", type=ErrorType.CONVERSATION_FINISHED.value,
                                   non_retryable=True)
        if state.phase is Phase.AWAITING_RESOLUTION:
            raise ApplicationError(AWAITING_RESOLUTION_TEXT, type=ErrorType.AWAITING_RESOLUTION.value,
                                   non_retryable=True)
        if state.phase is Phase.CLOSED:
            raise ApplicationError(f"conversation {state.conversation_id} is {state.status.value}; "
                                   "start a new conversation", type=ErrorType.CONVERSATION_FINISHED.value,
                                   non_retryable=True)

    @workflow.update(description="Check the conversation's store (sent with the start); an unknown store "
                                 "closes the conversation and fails with UnknownStore.")
    async def open(self, request: OpenConversation) -> ConversationOpened:
        """Check the conversation's store against the system of record (sent with the start:
        ``POST /conversations``); an unknown store closes the conversation and fails this
        update with ``UnknownStore``."""
        if not await store_known(self._state.store):
            self._request_cancel(CancelRequest(reason=unknown_store_reason(self._state.store)))
            raise unknown_store(self._state.store)
        return ConversationOpened(conversation_id=self._state.conversation_id, store=self._state.store,
                                  status=self._state.status.value)

    @open.validator
    def _validate_open(self, request: OpenConversation) -> None:
        self._refuse_unloadable()

    @workflow.update(description="Approve or reject a confirmed write awaiting a supervisor: {approval_id, "
                                 "decision: approve|reject, approver, note?}. Refused for an unknown id, an id "
                                 "bound to another operation, a second decision, an expired approval or a "
                                 "cancelled conversation.")
    def decide_approval(self, decision: ApprovalDecision) -> Approval:
        """Record a supervisor's decision; the main loop then runs or drops the write."""
        # checked again: two decisions accepted in one workflow task both passed the validator
        approval = check_decision(self._state.approvals, decision, workflow.now())
        tr.decide_approval(self._state, approval, decision, workflow.now())
        return approval

    @decide_approval.validator
    def _validate_decision(self, decision: ApprovalDecision) -> None:
        self._refuse_unloadable()
        if not self._state.phase.serving:
            raise ApplicationError("this conversation has finished; its approvals were withdrawn",
                                   type=ErrorType.APPROVAL_REFUSED.value, non_retryable=True)
        check_decision_text(decision)
        check_decision(self._state.approvals, decision, workflow.now())

    @workflow.update(description="An operator resolves a step whose outcome was unknown: {step_id, outcome: "
                                 "applied|not_applied, operator, note}. The user is told and the conversation "
                                 "goes on. Refused for an unknown step, a step that is not unknown, or a second "
                                 "resolution.")
    def resolve_outcome(self, request: ResolveOutcome) -> OutcomeResolution:
        """Apply the operator's resolution; returns its record (what the user was told)."""
        return self._resolution.resolve(request)

    @resolve_outcome.validator
    def _validate_resolution(self, request: ResolveOutcome) -> None:
        self._refuse_unloadable()
        self._resolution.check(request)

    @workflow.signal(description="Cancel the conversation: {reason, rollback}. In-flight model calls and reads "
                                 "stop; a write in flight finishes; rollback undoes reversible writes. The first "
                                 "cancel wins; later ones are ignored.")
    def cancel(self, request: CancelRequest) -> None:
        """Stop the conversation; a write already running finishes, nothing new starts.
        The first cancel wins: a second one neither changes the reason nor the rollback."""
        self._request_cancel(request)

    @workflow.query(description="The typed conversation state: customer, orders, steps with statuses, pinned "
                                "facts, pending confirmation, completed operations, rejections.")
    def state(self) -> ConversationState:
        """The typed conversation state (refused when the run's input state could not be loaded)."""
        self._refuse_unloadable()
        return self._state

    @workflow.query(description="The reply recorded for a message id (the update id, msg-<message id>), or "
                                "null: a retry of a message an earlier run answered, once the run has finished.")
    def answered_reply(self, update_id: str) -> Optional[AssistantReply]:
        """The reply recorded under ``update_id`` in this run or an earlier one (``None`` when
        none is recorded, or it is older than ``workflows.conversation.answered.ANSWERED_KEPT``)."""
        return self._answered.get(update_id)

    def _refuse_unloadable(self) -> None:
        if self._unloadable is not None:
            raise self._unloadable.failure()

    def _request_cancel(self, request: CancelRequest) -> None:
        if self._cancel is None:
            self._cancel = request
            tr.request_cancel(self._state)

    def _cancel_request(self) -> Optional[CancelRequest]:
        return self._cancel

    # --- main loop ------------------------------------------------------------

    @workflow.run
    async def run(self, inp: SupportInput) -> SupportOutcome:
        """Process messages one at a time until the conversation ends, is transferred,
        escalated or cancelled (continuing as new when the history grows). Raises
        ``asyncio.CancelledError`` after the cancel path when Temporal cancelled the run, and
        a non-retryable ``StateIncompatible`` ``ApplicationError`` when the input state cannot
        be loaded (``workflows.domain.migrations``)."""
        if self._unloadable is not None:
            if workflow.patched(FAILED_EVENT_PATCH):  # callers hear why the run ended
                await self._journal.send(self._journal.failed(workflow.info().run_id, "state-incompatible"))
            raise self._unloadable.failure()
        serving = asyncio.ensure_future(self._serve(inp))
        try:
            # shielded: Temporal's cancellation must not abandon a write in flight
            return await asyncio.shield(serving)
        except asyncio.CancelledError:
            self._request_cancel(CancelRequest(reason=replies.OPERATOR_CANCEL_REASON))
            await serving
            raise

    async def _serve(self, inp: SupportInput) -> SupportOutcome:
        state = self._state
        tr.start_run(state, inp.token_budget)
        if inp.journal is not None:
            self._journal.resend(inp.journal)
        interrupted: Optional[Inbound] = None
        while True:
            self._journal.flush(state)  # what the last step noted is written (in the background) before any wait
            if not state.phase.serving:
                # an escalated unknown outcome waits for an operator's resolution, then goes on
                if await self._resolution.wait(inp.resolution_wait_seconds):
                    continue
                break
            await self._wait_for_work()
            if not state.phase.serving:
                break
            if ready_to_settle(state, workflow.now()):
                try:
                    told = await settle_approvals(state, inp.approvals, inp.write_timeout_seconds,
                                                  self._cancel_request)
                except Interrupted:
                    break
                for text in told:
                    self._tell(text)
                continue
            inbound = self._inbox.pop(0)
            reply_text = await self._turn.run(inbound)
            if reply_text is None or state.phase is Phase.CLOSING:
                interrupted = inbound  # a cancel stopped this turn, or came in it: the cancel path answers it
                break
            self._answer(inbound, await escalated_with_cancel(state, self._cancel, reply_text,
                                                              inp.write_timeout_seconds))
            self._turns_this_run += 1
            if state.phase.serving and not self._inbox and (
                workflow.info().is_continue_as_new_suggested() or self._turns_this_run >= inp.max_turns_per_run
            ):
                await self._continue_as_new(inp)
        if state.phase is Phase.CLOSING:  # also when it interrupted a turn (``interrupted``)
            summary = await cancel_conversation(state, self._cancel, inp.write_timeout_seconds)
            self._answer(interrupted, summary, EntryKind.CANCELLATION)
        for queued in self._inbox:
            self._replies[queued.message_id] = self._reply(replies.finished(state.status.value))
            tr.refuse_message(state, queued.text, queued.update_id, self._replies[queued.message_id].text)
        self._inbox.clear()
        self._journal.flush(state)
        await self._journal.drain()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return SupportOutcome(status=state.status.value, state=state)

    async def _wait_for_work(self) -> None:
        """Until a message, a cancel, a supervisor's decision, or the next approval expiry."""
        expiry = next_expiry(self._state)
        timeout = max((expiry - workflow.now()).total_seconds(), 0.0) if expiry else None
        try:
            await workflow.wait_condition(
                lambda: bool(self._inbox) or not self._state.phase.serving
                or ready_to_settle(self._state, workflow.now()),
                timeout=timeout, timeout_summary="approval expiry" if timeout is not None else None)
        except asyncio.TimeoutError:
            pass  # an approval ran out of time: the loop settles it

    async def _continue_as_new(self, inp: SupportInput) -> None:
        """The history, not the state, is what grows: start a fresh run with the same state. A
        cancel that arrives while the handlers finish travels with it, and so does the turn's
        journal record (written first thing by the next run); earlier records still being
        written finish first, and a message arriving meanwhile is served here (returns)."""
        await self._journal.drain()
        if self._inbox or not self._state.phase.serving:
            return
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(inp.model_copy(update={"state": self._state.model_dump(mode="json"),
                                                        "cancel": self._cancel, "answered": self._answered.carried(),
                                                        "journal": self._journal.take(self._state)}),
                                 task_timeout=workflow.info().task_timeout)

    # --- what happened, and what the user is told -------------------------------

    def _record(self, event: tr.Event) -> None:
        """Every event the transitions record, as it is recorded: the journal's rows for it
        (sent once per turn, ``flush``), and the operators' view (Web UI details and search
        attributes), so the view also says what a long step is doing while it runs."""
        self._journal.record(event)
        if event.refreshes_view:
            self._visibility.publish(self._state, doing(event))

    def _answer(self, inbound: Optional[Inbound], text: str, kind: Optional[EntryKind] = None) -> None:
        """Tell the user ``text`` (``kind``: by default a reply to ``inbound``, or a notice told
        outside a turn) and, if a message awaits it, reply to that message."""
        tr.say(self._state, text, kind or (EntryKind.REPLY if inbound is not None else EntryKind.NOTICE))
        if inbound is not None:
            # outcomes the user was told outside a turn open the next reply they read
            text = " ".join([*self._notices, text])
            self._notices = []
            self._replies[inbound.message_id] = self._reply(text, inbound.text)

    def _tell(self, text: str, kind: EntryKind = EntryKind.NOTICE) -> None:
        """Tell the user ``text`` outside a turn; a notice also opens the next reply they read."""
        self._answer(None, text, kind)
        if kind is EntryKind.NOTICE:
            self._notices.append(text)

    def _reply(self, text: str, message: Optional[str] = None) -> AssistantReply:
        state = self._state
        # a write may be shown while another awaits a supervisor: the reply names both
        pending = state.pending_confirmation
        waiting = state.pending_approvals()[-1].approval_id if state.phase is Phase.AWAITING_APPROVAL else None
        return AssistantReply(text=text, turn=state.turn, status=state.status.value,
                              awaiting_confirmation=pending.detail if pending else None,
                              awaiting_approval=waiting,
                              message_digest=None if message is None else message_digest(message))
