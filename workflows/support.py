"""``SupportWorkflow``: one durable customer conversation — its message handlers and
its main loop.

Messages arrive by the ``send_message`` update, which returns the assistant's reply;
``cancel`` is a signal; ``state`` is a query. Handlers only enqueue: the main loop
processes one message at a time (``workflows.turn``), so turns never interleave. The
state object, not the transcript, is the record; it carries over continue-as-new.
"""

from __future__ import annotations

from typing import Optional

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from workflows import replies
from workflows import transitions as tr
from workflows.contracts import (
    AssistantReply,
    CancelRequest,
    SupportInput,
    SupportOutcome,
    UserMessage,
)
from workflows.errors import ErrorType
from workflows.opening import (
    ConversationOpened,
    OpenConversation,
    store_known,
    unknown_store,
    unknown_store_reason,
)
from workflows.options import MAX_USER_MESSAGE_BYTES
from workflows.state import ConversationState, ConversationStatus, Role
from workflows.turn import Inbound, TurnContext, run_turn
from workflows.visibility import Visibility


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
        self._state = inp.state or ConversationState(conversation_id=inp.conversation_id, store=inp.store)
        self._inbox: list[Inbound] = []
        self._replies: dict[int, AssistantReply] = {}
        self._next_message_id = 0
        self._cancel: Optional[CancelRequest] = None
        self._visibility = Visibility()
        self._turns_this_run = 0

    # --- message passing ------------------------------------------------------

    @workflow.update
    async def send_message(self, message: UserMessage) -> AssistantReply:
        """Deliver one user message; returns the assistant's reply to it."""
        self._next_message_id += 1
        message_id = self._next_message_id
        pending = self._state.pending_confirmation
        self._inbox.append(Inbound(message_id=message_id, text=message.text,
                                   seen_operation_id=pending.operation_id if pending else None,
                                   seen_digest=pending.digest if pending else None))
        await workflow.wait_condition(lambda: message_id in self._replies)
        return self._replies.pop(message_id)

    @send_message.validator
    def _validate_message(self, message: UserMessage) -> None:
        # A rejected update never enters history: the state stays exactly as it was.
        if not message.text.strip():
            raise ApplicationError("message text is empty", type=ErrorType.INVALID_MESSAGE.value, non_retryable=True)
        size = len(message.text.encode("utf-8"))
        if size > MAX_USER_MESSAGE_BYTES:
            raise ApplicationError(f"message is {size} bytes; the limit is {MAX_USER_MESSAGE_BYTES} bytes",
                                   type=ErrorType.INVALID_MESSAGE.value, non_retryable=True)
        if self._cancel is not None and self._state.is_open():
            raise ApplicationError(f"conversation {self._state.conversation_id} is being cancelled; "
                                   "start a new conversation", type=ErrorType.CONVERSATION_FINISHED.value,
                                   non_retryable=True)
        if not self._state.is_open():
            raise ApplicationError(f"conversation {self._state.conversation_id} is {self._state.status.value}; "
                                   "start a new conversation", type=ErrorType.CONVERSATION_FINISHED.value,
                                   non_retryable=True)

    @workflow.update
    async def open(self, request: OpenConversation) -> ConversationOpened:
        """Check the conversation's store against the system of record (sent with the start:
        ``POST /conversations``); an unknown store closes the conversation and fails this
        update with ``UnknownStore``."""
        if not await store_known(self._state.store):
            self._cancel = self._cancel or CancelRequest(reason=unknown_store_reason(self._state.store))
            raise unknown_store(self._state.store)
        return ConversationOpened(conversation_id=self._state.conversation_id, store=self._state.store,
                                  status=self._state.status.value)

    @workflow.signal
    def cancel(self, request: CancelRequest) -> None:
        """Stop the conversation; a write already running finishes, nothing new starts."""
        self._cancel = request

    @workflow.query
    def state(self) -> ConversationState:
        """The typed conversation state."""
        return self._state

    # --- main loop ------------------------------------------------------------

    @workflow.run
    async def run(self, inp: SupportInput) -> SupportOutcome:
        """Process messages one at a time until the conversation ends, is transferred,
        escalated or cancelled (continuing as new when the history grows)."""
        state = self._state
        ctx = TurnContext(state=state, write_timeout_seconds=inp.write_timeout_seconds,
                          cancel_request=lambda: self._cancel, visibility=self._visibility)
        self._visibility.publish(state)
        while state.is_open():
            await workflow.wait_condition(lambda: bool(self._inbox) or self._cancel is not None)
            if self._cancel is not None:
                tr.close(state, ConversationStatus.CANCELLED, self._cancel.reason)
                break
            inbound = self._inbox.pop(0)
            reply_text = await run_turn(ctx, inbound)
            tr.add_turn(state, Role.ASSISTANT, reply_text)
            self._replies[inbound.message_id] = self._reply(reply_text)
            self._visibility.publish(state)
            self._turns_this_run += 1
            if state.is_open() and not self._inbox and (
                workflow.info().is_continue_as_new_suggested() or self._turns_this_run >= inp.max_turns_per_run
            ):
                # the history, not the state, is what grows: start a fresh run with the same state
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(inp.model_copy(update={"state": state}))
        for queued in self._inbox:
            self._replies[queued.message_id] = self._reply(replies.finished(state.status.value))
        self._inbox.clear()
        self._visibility.publish(state)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return SupportOutcome(status=state.status.value, state=state)

    def _reply(self, text: str) -> AssistantReply:
        pending = self._state.pending_confirmation
        return AssistantReply(text=text, turn=self._state.turn, status=self._state.status.value,
                              awaiting_confirmation=pending.detail if pending else None)
