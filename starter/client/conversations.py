"""Python client for backend services: conversations (start, message, cancel, state),
standalone refunds, lists from search attributes, approval decisions. A thin layer over
the Temporal client; all logic lives in the workflows.

Every call has a deadline (``starter.client.core.Deadlines``) and raises ``ConversationError``
(``starter.client.errors``) with a ``kind`` the API maps to an HTTP status.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Optional, Sequence

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WithStartWorkflowOperation,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateStage,
)
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from starter.client.answered import recorded_or_refused
from starter.client.approvals import ApprovalCalls
from starter.client.core import Deadlines
from starter.client.errors import ConversationError, message_outcome_unknown
from starter.client.tenancy import tenant_priority
from starter.client.listing import ListingCalls
from starter.client.refunds import RefundCalls
from starter.client.refusals import (built as _built, check_ids as _check_ids, check_new_conversation_id,
                               finished as _finished, rpc_reason as _rpc_reason, untyped as _untyped, update_refusal as _update_refusal)
from starter.client.resolutions import ResolutionCalls
from starter.client.run_status import with_run_status
from starter.client.webhooks.calls import WebhookCalls
from workflows.domain.policy.approvals import ApprovalPolicy
from workflows.domain.contracts import (AssistantReply, CancelRequest, SupportInput, SupportOutcome, UserMessage,
                                 message_digest)
from workflows.domain.errors import ErrorType
from workflows.conversation.opening import ConversationOpened, OpenConversation
from workflows.domain.contracts import DEFAULT_WRITE_TIMEOUT_SECONDS
from workflows.options import CONVERSATION_TASK_TIMEOUT, STATUS
from workflows.domain.state import ConversationState
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id
from workflows.domain.user_text import control_problem, message_problem

__all__ = ["ConversationError", "Deadlines", "StatekeeperClient"]

FIRST_MESSAGE_ID = "first"
"""Message id of the first message sent with the start when the caller gave none."""


class StatekeeperClient(ApprovalCalls, RefundCalls, ListingCalls, ResolutionCalls, WebhookCalls):
    """``StatekeeperClient(temporal_client, task_queue, write_timeout_seconds, approvals=None,
    deadlines=None, pseudonym_key=None)``.

    Conversation ids are caller-chosen strings (a UUID by default); the workflow id is
    ``support-<conversation_id>``. ``write_timeout_seconds`` is the start-to-close timeout
    of the writes of the processes it starts; ``approvals`` (an ``ApprovalPolicy``, from
    ``Settings``) goes into their inputs; ``pseudonym_key`` maps a customer id to the
    ``CustomerId`` pseudonym for lists; ``token_budget`` (tokens, None: none),
    ``local_model_calls`` (``SupportInput.local_model_calls``) and ``memory``
    (``SupportInput.memory``) go into the inputs of the conversations it starts."""

    def __init__(self, client: Client, task_queue: str = "statekeeper",
                 write_timeout_seconds: float = DEFAULT_WRITE_TIMEOUT_SECONDS,
                 approvals: Optional[ApprovalPolicy] = None,
                 deadlines: Optional[Deadlines] = None, pseudonym_key: Optional[str] = None,
                 token_budget: Optional[int] = None, local_model_calls: bool = False,
                 memory: bool = True) -> None:
        super().__init__(client, task_queue, deadlines)
        self._memory = memory
        self._token_budget = token_budget
        self._local_model_calls = local_model_calls
        self._write_timeout = write_timeout_seconds
        self._approvals = approvals
        self._pseudonym_key = pseudonym_key

    def _policy(self) -> dict[str, Any]:
        """Input fields that carry the approval policy, when one is configured."""
        return {"approvals": self._approvals} if self._approvals is not None else {}

    # --- conversations ---------------------------------------------------------

    async def start_conversation(self, conversation_id: Optional[str] = None, *, store: str = "main",
                                 state: Optional[dict[str, Any]] = None,
                                 search_attributes: Sequence[SearchAttributePair] = ()) -> str:
        """Start (or find) a conversation and check its store; returns the conversation id.

        ``state`` resumes a saved conversation (a ``ConversationState`` JSON dump of any
        released schema version, migrated by the workflow; ignored when the id is running).
        ``search_attributes`` are set at the start (e.g. its ``Tenant``, ``starter.client.tenancy``).

        Idempotent on the id: a running conversation is kept (one run however often this is
        called); each call checks the store again (a fresh ``open`` update id: a recorded
        result of a finished run must not answer for it). Raises ``ConversationError``: ``invalid`` for an
        id over 128 characters (``refusals.NEW_CONVERSATION_ID_CHARS``) or a store the system of record
        does not have (the conversation is closed at once), ``conflict`` for an id running
        with another store, ``finished`` for the id of a finished conversation, ``stuck`` for
        the id of a running one whose workflow tasks keep failing (``starter.client.run_status``),
        ``state_incompatible`` when ``state`` (or the saved state of the id's run) cannot be
        loaded (the reason says why; the run failed), ``no_worker`` / ``unavailable``."""
        conversation_id = conversation_id or uuid.uuid4().hex
        check_new_conversation_id(conversation_id)
        _check_ids(conversation_id=conversation_id, store=store)
        opening = _built(OpenConversation, "the store is an id of 1 to 64 characters", store=store)
        await self.require_worker()  # before starting: a refused start leaves nothing running
        made: list[WithStartWorkflowOperation] = []

        def start() -> WithStartWorkflowOperation:
            # a fresh operation per attempt: the SDK refuses to send one twice, and run_update
            # sends again (same update id) when a busy worker did not accept the first in time
            made.append(WithStartWorkflowOperation(
                SupportWorkflow.run,
                SupportInput(conversation_id=conversation_id, store=store, write_timeout_seconds=self._write_timeout,
                             state=state, token_budget=self._token_budget,
                             local_model_calls=self._local_model_calls, memory=self._memory, **self._policy()),
                id=support_workflow_id(conversation_id), task_queue=self._task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                search_attributes=TypedSearchAttributes([SearchAttributePair(STATUS, "active"), *search_attributes]),
                static_summary=f"support conversation {conversation_id} (store {store})",
                task_timeout=CONVERSATION_TASK_TIMEOUT, priority=tenant_priority(search_attributes),
            ))
            return made[-1]

        open_id = f"open-{uuid.uuid4().hex}"  # one id per call, the same if it is sent again
        try:
            opened: ConversationOpened = await self.run_update(
                lambda timeout: self._client.start_update_with_start_workflow(
                    SupportWorkflow.open, opening, start_workflow_operation=start(),
                    wait_for_stage=WorkflowUpdateStage.ACCEPTED, id=open_id, rpc_timeout=timeout),
                "starting the conversation", stuck=self._stuck_check(conversation_id))
        except WorkflowAlreadyStartedError as err:
            raise await self._closed(conversation_id, ConversationError(_finished(conversation_id), "finished")) from err
        except WorkflowUpdateFailedError as err:
            raise await self._closed(conversation_id, _update_refusal(conversation_id, err)) from err
        except RPCError as err:
            raise await self._closed(conversation_id, ConversationError(*_rpc_reason(conversation_id, err))) from err
        finally:
            _read_starts(made)
        if opened.store != store:
            raise ConversationError(f"conversation {conversation_id} exists with another store; choose a new "
                                    "conversation id", "conflict")
        return conversation_id

    async def start_with_message(self, text: str, conversation_id: Optional[str] = None, *, store: str = "main",
                                 message_id: Optional[str] = None,
                                 state: Optional[dict[str, Any]] = None) -> tuple[str, AssistantReply]:
        """Start (or find) a conversation, then send its first message; returns the id and
        the reply. A repeat with the same conversation id (and message id) returns the same
        reply from the same run. Raises as ``start_conversation`` and ``send_message``."""
        message_id = message_id or FIRST_MESSAGE_ID
        try:
            conversation_id = await self.start_conversation(conversation_id, store=store, state=state)
        except ConversationError as err:
            if err.kind != "finished" or conversation_id is None:
                raise
            # a repeat after the first message ended the conversation: the server still
            # answers a message id it recorded; any other message is refused as finished
        return conversation_id, await self.send_message(conversation_id, text, message_id)

    async def send_message(self, conversation_id: str, text: str, message_id: Optional[str] = None) -> AssistantReply:
        """Send one user message and wait for the assistant's reply.

        ``message_id`` (generated when None) is the update id: sending the same id again
        returns the original reply and the message is handled once. Raises
        ``ConversationError``: ``invalid_message`` (empty, over 8 KB, a control character or
        a lone surrogate: the update validator's own words, refused here before sending),
        ``invalid`` (an id with a control character), ``finished``, ``state_incompatible``,
        ``stuck`` (the conversation's workflow tasks keep failing: known once the message is not
        accepted within ``accept_seconds``, or while its reply is awaited; ``err.message_id``
        names the id to send it again with once it moves), ``not_found``, ``timeout``,
        ``no_worker``, and ``outcome_unknown`` when Temporal stopped
        answering while the message was on its way (``err.message_id`` names the id to send it
        again with, the generated one included)."""
        problem = message_problem(text)
        if problem is not None:
            raise ConversationError(problem, "invalid_message")
        _check_ids(conversation_id=conversation_id, message_id=message_id)
        handle = self._client.get_workflow_handle(support_workflow_id(conversation_id))
        message_id = message_id or uuid.uuid4().hex
        update_id = f"msg-{message_id}"
        try:
            reply: AssistantReply = await self.run_update(
                lambda timeout: handle.start_update(SupportWorkflow.send_message, UserMessage(text=text),
                                                    wait_for_stage=WorkflowUpdateStage.ACCEPTED, id=update_id,
                                                    rpc_timeout=timeout, result_type=AssistantReply),
                "the message", unknown=message_outcome_unknown(message_id),
                stuck=self._stuck_check(conversation_id, message_id))
        except WorkflowUpdateFailedError as err:
            if _untyped(err) and await self._running(handle):
                # the run the message waited on ended under it (a reset, continue-as-new) and the
                # conversation goes on: the newer run may have taken it; only the same id can tell
                raise message_outcome_unknown(message_id, "the conversation was restarted while the message "
                                              "waited (a reset)") from err
            reply = await recorded_or_refused(self, conversation_id, update_id, _update_refusal(conversation_id, err), err)
        except RPCError as err:  # a definite refusal (unclear ones are outcome_unknown: run_update)
            reply = await recorded_or_refused(self, conversation_id, update_id,
                                              ConversationError(*_rpc_reason(conversation_id, err)), err)
        if reply.message_digest not in (None, message_digest(text)):  # None: a reply of an older release
            if not await self._running(handle):  # a new message id cannot help there: say it has finished
                raise await self._closed(conversation_id, ConversationError(_finished(conversation_id), "finished"))
            raise ConversationError(f'message id "{message_id}" was already used for another message, which '
                                    "was the one handled; send this one with a new message id", "conflict")
        return reply

    async def cancel(self, conversation_id: str, reason: Optional[str] = None, rollback: bool = False) -> None:
        """Signal the conversation to stop; a write already running finishes first; with
        ``rollback`` its reversible writes are undone. Raises ``ConversationError``
        ``finished``, ``state_incompatible``, ``not_found``, ``unavailable`` or ``invalid``
        (a reason or id with a control character)."""
        _check_ids(conversation_id=conversation_id)
        problem = control_problem(reason, "the reason") if reason else None
        if problem is not None:
            raise ConversationError(problem, "invalid")
        handle = self._client.get_workflow_handle(support_workflow_id(conversation_id))
        request = (_built(CancelRequest, "the reason is at most 1000 characters", reason=reason, rollback=rollback)
                   if reason else CancelRequest(rollback=rollback))
        try:
            await self.bounded(handle.signal(SupportWorkflow.cancel, request, rpc_timeout=self.rpc_timeout))
        except RPCError as err:
            raise await self._closed(conversation_id, ConversationError(*_rpc_reason(conversation_id, err))) from err

    async def state(self, conversation_id: str) -> ConversationState:
        """The conversation's typed state (also after it finished, while history is retained).
        Raises ``ConversationError`` ``state_incompatible`` (its run failed: its saved state
        cannot be loaded), ``stuck`` (its workflow tasks keep failing, so no worker can answer
        for it), ``not_found``, ``no_worker`` or ``unavailable``."""
        handle = self._client.get_workflow_handle(support_workflow_id(conversation_id))
        try:
            state = await self.read(lambda: handle.query(SupportWorkflow.state, result_type=ConversationState,
                                                         rpc_timeout=self.rpc_timeout))
        except WorkflowQueryFailedError as err:
            # the workflow refused to answer: a run whose saved state cannot be loaded, or one
            # whose workflow code fails on its history
            raise await self._stuck_or(conversation_id, await self._closed(conversation_id, ConversationError(
                f"conversation {conversation_id} could not answer; retry later", "unavailable"), always=True)) from err
        except RPCError as err:
            reason, kind = _rpc_reason(conversation_id, err)
            if kind == "unavailable":  # a query needs a worker: say so when none polls
                await self.require_worker()
                raise await self._stuck_or(conversation_id, ConversationError(reason, kind)) from err
            raise ConversationError(reason, kind) from err
        except ConversationError as err:
            await self.require_worker()  # no worker: no_worker; else the worker is busy, or the run stuck
            raise await self._stuck_or(conversation_id, ConversationError(
                f"conversation {conversation_id} did not answer within {self.deadlines.rpc_seconds:.0f} s; retry",
                "timeout")) from err
        return await with_run_status(self, handle, state)

    async def outcome(self, conversation_id: str) -> SupportOutcome:
        """Wait for the conversation to finish (no deadline: for tests and scripts); returns
        its final status and state."""
        handle = self._client.get_workflow_handle_for(SupportWorkflow.run, support_workflow_id(conversation_id))
        return await handle.result()

    async def serving(self, conversation_id: str) -> Optional[bool]:
        """Whether the conversation's latest run is running (True) or closed (False); None
        when it has no run. Raises ``temporalio.service.RPCError`` when Temporal does not
        answer."""
        return await self.run_serving(support_workflow_id(conversation_id))

    async def _running(self, handle: Any) -> bool:
        """True when the conversation's latest run is running (False when that cannot be read)."""
        try:
            described = await self.read(lambda: handle.describe(rpc_timeout=self.rpc_timeout))
        except Exception:  # noqa: BLE001 - unreadable: keep the refusal as it is
            return False
        return described.status is WorkflowExecutionStatus.RUNNING

    def _stuck_check(self, conversation_id: str, message_id: Optional[str] = None):  # -> core.StuckCheck
        """The ``stuck`` check of the conversation's run, for ``run_update``."""
        return lambda: self.stuck(support_workflow_id(conversation_id), f"conversation {conversation_id}", message_id)

    async def _stuck_or(self, conversation_id: str, refusal: ConversationError) -> ConversationError:
        """The ``stuck`` refusal when the conversation's workflow tasks keep failing, else ``refusal``."""
        if refusal.kind in ("finished", "state_incompatible", "not_found"):
            return refusal
        return await self.stuck(support_workflow_id(conversation_id), f"conversation {conversation_id}") or refusal

    async def _closed(self, conversation_id: str, refusal: ConversationError, always: bool = False) -> ConversationError:
        """``refusal``, unless the conversation's run failed because its saved state cannot be
        loaded: then ``state_incompatible`` with the reason (looked up for a ``finished``
        refusal, or ``always``)."""
        if refusal.kind != "finished" and not always:
            return refusal
        reason = await self.failure_of(support_workflow_id(conversation_id), ErrorType.STATE_INCOMPATIBLE.value)
        return ConversationError(reason, "state_incompatible") if reason else refusal


def _read_starts(operations: list[WithStartWorkflowOperation]) -> None:
    """Mark the start operations' outcomes read: the SDK sets the failure of a refused start
    (a finished conversation's id: ``WorkflowAlreadyStartedError``) on a future nobody awaits,
    and asyncio logged it at ERROR with its tracebacks when the future was collected."""
    for operation in operations:
        started = getattr(operation, "_workflow_handle", None)  # the SDK's future of the started run
        if isinstance(started, asyncio.Future) and started.done() and not started.cancelled():
            started.exception()
