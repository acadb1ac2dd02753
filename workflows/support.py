"""``SupportWorkflow``: one durable customer conversation.

Per user turn: pin facts → ask the model for a proposal (a stateless activity over a
snapshot of the state) → validate it against the policy → run reads, or show a write's
exact detail and wait for the user's yes → execute (refund-type writes as a child
``RefundWorkflow``) → reply. The state object, not the transcript, is the record.

Messages arrive by the ``send_message`` update, which returns the assistant's reply;
``cancel`` is a signal; ``state`` is a query. Handlers only enqueue: the main loop
processes one message at a time, so turns never interleave.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Optional

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

    from workflows import transitions as tr
    from workflows.actions import (
        REFUND_TOOLS,
        call_arguments,
        call_digest,
        idempotency_key,
        make_tool_call,
    )
    from workflows.confirm import confirmation_prompt, describe, is_no, is_yes
    from workflows.contracts import (
        AssistantReply,
        CancelRequest,
        ModelRequest,
        ModelResult,
        ReadToolRequest,
        RefundInput,
        RefundOutcome,
        SupportInput,
        SupportOutcome,
        TicketRequest,
        ToolResult,
        UserMessage,
        WriteToolRequest,
    )
    from workflows.options import (
        CUSTOMER_ID,
        MAX_CONSECUTIVE_REJECTIONS,
        MAX_MODEL_STEPS_PER_TURN,
        MAX_USER_MESSAGE_BYTES,
        MODEL_RETRY,
        MODEL_TIMEOUT,
        ORDER_ID,
        READ_RETRY,
        READ_TIMEOUT,
        STEP,
        WRITE_RETRY,
    )
    from workflows.policy import Rule, validate_execution, validate_proposal
    from workflows.prompt import render_snapshot
    from workflows.refund import RefundWorkflow, refund_workflow_id
    from workflows.state import (
        Confirmation,
        ConversationState,
        ConversationStatus,
        PendingConfirmation,
        Role,
        StepStatus,
    )


class _Inbound(BaseModel):
    message_id: int
    text: str
    seen_operation_id: Optional[str] = None
    seen_digest: Optional[str] = None
    """The proposal (operation id and detail digest) awaiting confirmation when this message
    was accepted: a yes confirms only what had been shown before the user sent it."""


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
        self._inbox: list[_Inbound] = []
        self._replies: dict[int, AssistantReply] = {}
        self._next_message_id = 0
        self._cancel: Optional[CancelRequest] = None
        self._published: dict[str, str] = {}
        self._turns_this_run = 0

    # --- message passing ------------------------------------------------------

    @workflow.update
    async def send_message(self, message: UserMessage) -> AssistantReply:
        """Deliver one user message; returns the assistant's reply to it."""
        self._next_message_id += 1
        message_id = self._next_message_id
        pending = self._state.pending_confirmation
        self._inbox.append(_Inbound(message_id=message_id, text=message.text,
                                    seen_operation_id=pending.operation_id if pending else None,
                                    seen_digest=pending.digest if pending else None))
        await workflow.wait_condition(lambda: message_id in self._replies)
        return self._replies.pop(message_id)

    @send_message.validator
    def _validate_message(self, message: UserMessage) -> None:
        # A rejected update never enters history: the state stays exactly as it was.
        if not message.text.strip():
            raise ApplicationError("message text is empty", type="InvalidMessage", non_retryable=True)
        size = len(message.text.encode("utf-8"))
        if size > MAX_USER_MESSAGE_BYTES:
            raise ApplicationError(f"message is {size} bytes; the limit is {MAX_USER_MESSAGE_BYTES} bytes",
                                   type="InvalidMessage", non_retryable=True)
        if self._cancel is not None and self._state.is_open():
            raise ApplicationError(f"conversation {self._state.conversation_id} is being cancelled; "
                                   "start a new conversation", type="ConversationFinished", non_retryable=True)
        if not self._state.is_open():
            raise ApplicationError(f"conversation {self._state.conversation_id} is {self._state.status.value}; "
                                   "start a new conversation", type="ConversationFinished", non_retryable=True)

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
        self._publish()
        while self._state.is_open():
            await workflow.wait_condition(lambda: bool(self._inbox) or self._cancel is not None)
            if self._cancel is not None:
                self._close(ConversationStatus.CANCELLED, self._cancel.reason)
                break
            inbound = self._inbox.pop(0)
            reply_text = await self._turn(inbound)
            tr.add_turn(self._state, Role.ASSISTANT, reply_text)
            self._replies[inbound.message_id] = self._reply(reply_text)
            self._publish()
            self._turns_this_run += 1
            if self._state.is_open() and not self._inbox and (
                workflow.info().is_continue_as_new_suggested() or self._turns_this_run >= self._input.max_turns_per_run
            ):
                # the history, not the state, is what grows: start a fresh run with the same state
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self._input.model_copy(update={"state": self._state}))
        for pending in self._inbox:
            self._replies[pending.message_id] = self._reply(f"The conversation is {self._state.status.value}.")
        self._inbox.clear()
        self._publish()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return SupportOutcome(status=self._state.status.value, state=self._state)

    def _reply(self, text: str) -> AssistantReply:
        pending = self._state.pending_confirmation
        return AssistantReply(text=text, turn=self._state.turn, status=self._state.status.value,
                              awaiting_confirmation=pending.detail if pending else None)

    def _close(self, status: ConversationStatus, reason: str) -> None:
        state = self._state
        if state.pending_confirmation is not None:
            tr.finish_step(state, state.pending_confirmation.operation_id, StepStatus.CANCELLED, reason)
            state.pending_confirmation = None
        for step in state.steps:
            if step.status in (StepStatus.PENDING, StepStatus.RUNNING):
                tr.finish_step(state, step.step_id, StepStatus.CANCELLED, reason)
        state.status = status
        state.ended_reason = reason

    async def _turn(self, inbound: _Inbound) -> str:
        state = self._state
        text = inbound.text
        tr.receive_user_message(state, text)
        pending = state.pending_confirmation
        if pending is not None:
            state.pending_confirmation = None
            if is_yes(text):
                confirmation = Confirmation(operation_id=inbound.seen_operation_id or "",
                                            digest=inbound.seen_digest or "", turn=state.turn, verbatim=text)
                verdict = validate_execution(state, pending, confirmation)
                if not verdict.accepted:
                    tr.finish_step(state, pending.operation_id, StepStatus.CANCELLED, verdict.reason)
                    tr.reject(state, verdict.rule.value, verdict.reason, _proposal(pending.call))
                else:
                    await self._execute(pending)
                    if not state.is_open():
                        return state.ended_reason or "The conversation was escalated to a human agent."
            else:
                declined = "the user declined" if is_no(text) else "the user changed the subject"
                tr.finish_step(state, pending.operation_id, StepStatus.CANCELLED, declined)
                tr.reject(state, Rule.USER_DECLINED.value, f"{declined}: {pending.detail}", _proposal(pending.call))
        return await self._agent_loop()

    async def _agent_loop(self) -> str:
        state = self._state
        consecutive_rejections = 0
        for _ in range(MAX_MODEL_STEPS_PER_TURN):
            if self._cancel is not None:
                self._close(ConversationStatus.CANCELLED, self._cancel.reason)
                done = [f"{op.tool} {op.arguments.get('order_id', '')} ({'done' if op.ok else op.result})"
                        for op in state.completed_operations if op.turn == state.turn]
                return "The conversation was cancelled." + (f" Completed before it stopped: {'; '.join(done)}."
                                                            if done else "")
            proposal = await self._propose()
            if proposal is None:
                consecutive_rejections += 1
            else:
                action = proposal.action
                verdict = validate_proposal(state, action)
                if not verdict.accepted:
                    tr.reject(state, verdict.rule.value, verdict.reason, action.model_dump(mode="json"))
                    consecutive_rejections += 1
                else:
                    consecutive_rejections = 0
                    reply = await self._apply(action, verdict.needs_confirmation)
                    if reply is not None:
                        return reply
                    continue
            if consecutive_rejections >= MAX_CONSECUTIVE_REJECTIONS:
                last = state.last_rejection()
                return f"Sorry, I can't do that: {last.reason if last else 'the request was refused'}."
        return "Sorry, I could not finish that request. Could you tell me again what you need?"

    async def _propose(self) -> Optional[ModelResult]:
        state = self._state
        self._publish("model proposing the next action")
        try:
            result = await workflow.execute_activity(
                "propose_action",
                ModelRequest(conversation_id=state.conversation_id, snapshot=render_snapshot(state)),
                result_type=ModelResult,
                start_to_close_timeout=MODEL_TIMEOUT,
                retry_policy=MODEL_RETRY,
                summary=f"model proposes the next action (turn {state.turn})",
            )
        except ActivityError as err:
            tr.reject(state, Rule.MALFORMED_OUTPUT.value, f"model call failed {_cause(err)}"[:1000])
            return None
        state.usage.model_calls += 1
        state.usage.input_tokens += result.input_tokens
        state.usage.output_tokens += result.output_tokens
        state.usage.model = result.model
        return result

    async def _apply(self, action: Any, needs_confirmation: bool) -> Optional[str]:
        """Run an accepted action; returns the reply that ends the turn, or None to ask the
        model again. A write (``needs_confirmation``) is only shown, never run, here."""
        state = self._state
        if action.kind == "reply":
            return action.text
        if action.kind == "end":
            self._close(ConversationStatus.ENDED, "ended by the assistant")
            return action.text
        if action.kind == "transfer_to_human":
            await self._open_ticket(action.summary, f"transfer:{state.conversation_id}:{workflow.uuid4()}")
            self._close(ConversationStatus.TRANSFERRED, "transferred to a human agent")
            return "YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON."
        call = action.tool
        if not needs_confirmation:
            try:
                result = await self._read(call)
            except ActivityError as err:
                # retries are exhausted (e.g. the database is down): keep the state, tell the user
                reason = f"{call.name} failed: {_cause(err)}"
                tr.reject(state, Rule.TOOL_ERROR.value, reason, _proposal(call))
                return "Sorry, I can't reach our order system right now. Please try again in a moment."
            tr.apply_read_result(state, call, result.result)
            return None
        operation_id = str(workflow.uuid4())
        detail = describe(state, call)
        state.pending_confirmation = PendingConfirmation(operation_id=operation_id, call=call, detail=detail,
                                                         digest=call_digest(call), proposed_turn=state.turn)
        tr.start_step(state, operation_id, call.name, detail, operation_id=operation_id)
        self._publish()
        return confirmation_prompt(detail)

    async def _read(self, call: Any) -> ToolResult:
        return await workflow.execute_activity(
            "run_read_tool",
            ReadToolRequest(store=self._state.store, call=call),
            result_type=ToolResult,
            start_to_close_timeout=READ_TIMEOUT,
            retry_policy=READ_RETRY,
            summary=f"{call.name} {' '.join(str(v) for v in call_arguments(call).values())}"[:200],
        )

    async def _execute(self, pending: PendingConfirmation) -> None:
        state = self._state
        call, operation_id = pending.call, pending.operation_id
        key = idempotency_key(call, operation_id)
        tr.finish_step(state, operation_id, StepStatus.RUNNING)
        self._publish()
        child_id: Optional[str] = None
        try:
            if call.name in REFUND_TOOLS:
                child_id, outcome = await self._run_refund(call, operation_id)
                result = ToolResult(result=outcome.result, ok=outcome.ok, replayed=outcome.replayed)
            else:
                result = await workflow.execute_activity(
                    "run_write_tool",
                    WriteToolRequest(store=state.store, call=call, idempotency_key=key),
                    result_type=ToolResult,
                    start_to_close_timeout=timedelta(seconds=self._input.write_timeout_seconds),
                    retry_policy=WRITE_RETRY,
                    summary=f"{call.name} {key.split(':')[1]}",
                )
        except (ActivityError, ChildWorkflowError) as err:
            # The outcome is unknown and retries are exhausted: stop and hand over, never replay blindly.
            reason = f"{call.name} could not be shown to have completed ({err}); escalated to a human agent"
            tr.finish_step(state, operation_id, StepStatus.FAILED, reason)
            await self._open_ticket(reason, f"escalate:{key}")
            self._close(ConversationStatus.ESCALATED, reason)
            return
        tr.apply_write_result(state, call, operation_id, key, result.result, result.ok, child_id)
        tr.finish_step(state, operation_id, StepStatus.DONE if result.ok else StepStatus.FAILED,
                       None if result.ok else result.result)
        if not result.ok:
            tr.reject(state, Rule.TOOL_ERROR.value, result.result, _proposal(call))
        elif call.name in REFUND_TOOLS and state.customer is not None:
            # Refunds move gift-card balances: refresh them so the next check sees the system of record.
            refresh = make_tool_call("get_user_details", {"user_id": state.customer.user_id})
            try:
                tr.apply_read_result(state, refresh, (await self._read(refresh)).result)
            except ActivityError as err:
                # the write is done and recorded; stale balances only make the policy stricter until the next read
                tr.reject(state, Rule.TOOL_ERROR.value, f"refreshing the customer failed: {_cause(err)}",
                          _proposal(refresh))
        self._publish()

    async def _run_refund(self, call: Any, operation_id: str) -> tuple[str, RefundOutcome]:
        """Run the write as a child ``RefundWorkflow``; returns (its workflow id, its outcome)."""
        state = self._state
        assert state.customer is not None
        order_id = call_arguments(call)["order_id"]
        child_id = refund_workflow_id(state.store, order_id, operation_id)
        return child_id, await workflow.execute_child_workflow(
            RefundWorkflow.run,
            RefundInput(store=state.store, operation_id=operation_id, call=call,
                        expected_user_id=state.customer.user_id, notify_email=state.customer.email or None,
                        conversation_id=state.conversation_id,
                        write_timeout_seconds=self._input.write_timeout_seconds),
            id=child_id,
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            static_summary=f"{call.name} {order_id}",
        )

    async def _open_ticket(self, summary: str, ticket_key: str) -> bool:
        """Open a human-agent ticket; False if it could not be opened (the conversation
        still closes, and its Step search attribute tells operators it needs a human)."""
        state = self._state
        try:
            return await workflow.execute_activity(
                "open_ticket",
                TicketRequest(store=state.store, ticket_key=ticket_key,
                              user_id=state.customer.user_id if state.customer else None, summary=summary),
                result_type=bool,
                start_to_close_timeout=READ_TIMEOUT,
                retry_policy=READ_RETRY,
                summary="open a human-agent ticket",
            )
        except ActivityError as err:
            tr.reject(state, Rule.TOOL_ERROR.value, f"opening the ticket failed: {_cause(err)}")
            return False

    # --- visibility -------------------------------------------------------------

    def _sync_search_attributes(self, step: str) -> None:
        """Upsert only the search attributes whose value changed: each upsert is a
        history event and a visibility write."""
        state = self._state
        wanted = {STEP: step}
        if state.customer is not None:
            wanted[CUSTOMER_ID] = state.customer.user_id
        if state.orders:
            wanted[ORDER_ID] = max(state.orders.values(), key=lambda order: order.read_turn).order_id
        changed = [key.value_set(value) for key, value in wanted.items() if self._published.get(key.name) != value]
        if changed:
            workflow.upsert_search_attributes(changed)
            self._published.update({key.name: value for key, value in wanted.items()})

    def _business_step(self) -> str:
        state = self._state
        if state.pending_confirmation is not None:
            return "awaiting_confirmation"
        running = [step for step in state.steps if step.status == StepStatus.RUNNING]
        return running[-1].name if running else state.status.value

    def _publish(self, activity: Optional[str] = None) -> None:
        """Refresh the UI's current details and the ``Step`` search attribute (the business
        step; what the workflow is doing right now, e.g. asking the model, is details only)."""
        state = self._state
        step = self._business_step()
        self._sync_search_attributes(step)
        lines = [f"**Conversation** `{state.conversation_id}` — {state.status.value}, turn {state.turn}",
                 f"**Current step:** {step}" + (f" ({activity})" if activity else "")]
        if state.customer:
            lines.append(f"**Customer:** {state.customer.user_id}")
        if state.pending_confirmation:
            lines.append(f"**Awaiting confirmation:** {state.pending_confirmation.detail}")
        if state.completed_operations:
            last = state.completed_operations[-1]
            lines.append(f"**Last write:** {last.tool} `{last.idempotency_key}` ok={last.ok}")
        workflow.set_current_details("\n\n".join(lines))


def _cause(err: ActivityError) -> str:
    """``(Type): message`` of an activity failure's cause, for rejection reasons."""
    cause = err.cause
    if isinstance(cause, ApplicationError):
        return f"({cause.type}): {cause.message}"
    return f"({type(cause).__name__}): {cause}"


def _proposal(call: Any) -> dict[str, Any]:
    return {"kind": "tool_call", "tool": {"name": call.name, "arguments": call_arguments(call)}}
