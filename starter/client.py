"""Python client for backend services: start a conversation, send a message, cancel,
read state. A thin layer over the Temporal client; all logic lives in the workflows."""

from __future__ import annotations

import uuid
from typing import Optional

from pydantic import ValidationError
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from settings import Settings
from workflows.approvals import Approval, ApprovalDecision, ApprovalPolicy, workflow_id_of
from workflows.contracts import (
    AssistantReply,
    CancelRequest,
    SupportInput,
    SupportOutcome,
    UserMessage,
)
from workflows.errors import ErrorType
from workflows.options import DEFAULT_WRITE_TIMEOUT_SECONDS
from workflows.state import ConversationState
from workflows.support import SupportWorkflow, support_workflow_id


class ConversationError(Exception):
    """A request about a conversation was refused. ``str(err)`` is the reason, meant for
    the caller's user; ``kind`` is one of ``invalid_message`` (empty or over 8 KB),
    ``finished`` (ended, cancelled, transferred), ``not_found`` or ``unavailable``."""

    def __init__(self, reason: str, kind: str = "unavailable") -> None:
        super().__init__(reason)
        self.kind = kind


class StatekeeperClient:
    """``StatekeeperClient(temporal_client, task_queue, write_timeout_seconds)``; conversation
    ids are caller-chosen strings (a UUID by default); the workflow id is
    ``support-<conversation_id>``. ``write_timeout_seconds`` is the start-to-close timeout of
    the writes of the conversations it starts; ``approvals`` (default: ``ApprovalPolicy()``,
    build it with ``approval_policy(settings)``) says when their refunds wait for a supervisor."""

    def __init__(self, client: Client, task_queue: str = "statekeeper",
                 write_timeout_seconds: float = DEFAULT_WRITE_TIMEOUT_SECONDS,
                 approvals: ApprovalPolicy | None = None) -> None:
        self._client = client
        self._task_queue = task_queue
        self._write_timeout = write_timeout_seconds
        self._approvals = approvals or ApprovalPolicy()

    async def start_conversation(self, conversation_id: Optional[str] = None, *, store: str = "main") -> str:
        """Start a ``SupportWorkflow``; returns the conversation id. Starting an id that is
        already running is a no-op (the running conversation is kept); reusing the id of a
        finished conversation raises ``ConversationError`` (kind ``finished``)."""
        conversation_id = conversation_id or uuid.uuid4().hex
        try:
            await self._start(conversation_id, store)
        except WorkflowAlreadyStartedError as err:
            raise ConversationError(_finished(conversation_id), "finished") from err
        return conversation_id

    async def _start(self, conversation_id: str, store: str) -> None:
        await self._client.start_workflow(
            SupportWorkflow.run,
            SupportInput(conversation_id=conversation_id, store=store, write_timeout_seconds=self._write_timeout,
                         approvals=self._approvals),
            id=support_workflow_id(conversation_id),
            task_queue=self._task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            static_summary=f"support conversation {conversation_id} (store {store})",
        )

    async def send_message(self, conversation_id: str, text: str) -> AssistantReply:
        """Send one user message and wait for the assistant's reply.

        Raises ``ConversationError`` when the message is rejected (empty, over 8 KB, the
        conversation has finished) or the conversation does not exist.
        """
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ConversationError("message is not valid Unicode text (lone surrogate)", "invalid_message") from err
        handle = self._client.get_workflow_handle(support_workflow_id(conversation_id))
        try:
            return await handle.execute_update(SupportWorkflow.send_message, UserMessage(text=text),
                                               result_type=AssistantReply)
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            if getattr(cause, "type", None) == ErrorType.INVALID_MESSAGE.value:
                raise ConversationError(getattr(cause, "message", None) or str(cause), "invalid_message") from err
            # ConversationFinished, or the workflow closed while the update waited (a cancel race)
            reason = getattr(cause, "message", None) or ""
            if FINISHED_HINT not in reason:
                reason = _finished(conversation_id)
            raise ConversationError(reason, "finished") from err
        except RPCError as err:
            raise ConversationError(*_rpc_reason(conversation_id, err)) from err

    async def cancel(self, conversation_id: str, reason: Optional[str] = None) -> None:
        """Signal the conversation to stop; a write already running finishes first."""
        handle = self._client.get_workflow_handle(support_workflow_id(conversation_id))
        request = CancelRequest(reason=reason) if reason else CancelRequest()
        try:
            await handle.signal(SupportWorkflow.cancel, request)
        except RPCError as err:
            raise ConversationError(*_rpc_reason(conversation_id, err)) from err

    async def state(self, conversation_id: str) -> ConversationState:
        """The conversation's typed state (works after it finished, while history is retained)."""
        handle = self._client.get_workflow_handle(support_workflow_id(conversation_id))
        try:
            return await handle.query(SupportWorkflow.state, result_type=ConversationState)
        except RPCError as err:
            raise ConversationError(*_rpc_reason(conversation_id, err)) from err

    async def outcome(self, conversation_id: str) -> SupportOutcome:
        """Wait for the conversation to finish; returns its final status and state."""
        handle = self._client.get_workflow_handle_for(SupportWorkflow.run, support_workflow_id(conversation_id))
        return await handle.result()

    # --- approvals (issue 6, item 4) ------------------------------------------------------

    async def decide_approval(self, approval_id: str, decision: str, approver: str,
                              note: Optional[str] = None) -> Approval:
        """Approve (``decision="approve"``) or reject (``"reject"``) a pending approval as
        ``approver`` (1-128 characters ``[A-Za-z0-9._:@-]``); returns the decided ``Approval``.
        The process is the one the approval id names (a conversation or a refund).

        Raises ``ConversationError`` kind ``not_found`` for a malformed id or one naming no
        process, and kind ``approval_refused`` for a decision the process refuses (an id
        bound to another operation, a second decision, an expired approval, a finished
        process) or a malformed decision (bad approver, note over 1000 characters).
        """
        try:
            workflow_id = workflow_id_of(approval_id)
            body = ApprovalDecision(approval_id=approval_id, decision=decision, approver=approver, note=note)
        except ValidationError as err:
            fields = ", ".join(str(e["loc"][0]) for e in err.errors())
            raise ConversationError(f"the decision is malformed ({fields})", "approval_refused") from err
        except ValueError as err:
            raise ConversationError("no approval with this id exists", "not_found") from err
        handle = self._client.get_workflow_handle(workflow_id)
        try:
            return await handle.execute_update(DECIDE_APPROVAL, body, result_type=Approval)
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            if getattr(cause, "type", None) == ErrorType.APPROVAL_REFUSED.value:
                raise ConversationError(getattr(cause, "message", None) or str(cause), "approval_refused") from err
            raise ConversationError("the process awaiting this approval has finished or cannot take decisions",
                                    "approval_refused") from err
        except RPCError as err:
            text = str(err).lower()
            if "not found" in text:
                raise ConversationError("no process awaits this approval", "not_found") from err
            if "completed" in text or "closed" in text:
                raise ConversationError("the process awaiting this approval has finished", "approval_refused") from err
            raise ConversationError("the approval could not be decided right now; try again", "unavailable") from err


DECIDE_APPROVAL = "decide_approval"
"""The update both ``SupportWorkflow`` and ``RefundWorkflow`` define (``workflows.approvals``)."""


def approval_policy(settings: Settings) -> ApprovalPolicy:
    """The ``ApprovalPolicy`` of ``settings`` (``approval_threshold``, ``approval_timeout_seconds``),
    for ``StatekeeperClient(..., approvals=approval_policy(settings))``."""
    return ApprovalPolicy(threshold=settings.approval_threshold, timeout_seconds=settings.approval_timeout_seconds)


FINISHED_HINT = "start a new conversation"


def _finished(conversation_id: str) -> str:
    return f"conversation {conversation_id} has finished; {FINISHED_HINT}"


def _rpc_reason(conversation_id: str, err: RPCError) -> tuple[str, str]:
    # the server's message quotes the workflow id, which is caller-chosen text: blank it first
    text = str(err).replace(support_workflow_id(conversation_id), "<id>").replace(conversation_id, "<id>").lower()
    if "completed" in text or "closed" in text or "closing" in text:
        return _finished(conversation_id), "finished"
    if "not found" in text:
        return f"conversation {conversation_id} does not exist", "not_found"
    return f"conversation {conversation_id}: {err}", "unavailable"
