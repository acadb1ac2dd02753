"""Standalone refunds for backend services: start one ``RefundWorkflow`` per request
(``workflows.refund.standalone.RefundRequest``) and read its status.

The workflow id comes from the request's business identity, so a repeated request finds
the same run. The request's digest is kept in the run's memo: the same ``request_id``
with any other field different is a ``conflict``, never a second run.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Optional, Sequence

from pydantic import BaseModel, ValidationError
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowQueryFailedError
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from starter.client.tenancy import tenant_priority
from starter.client.core import ClientCore
from starter.client.errors import ConversationError, unreachable
from starter.client.listing import SUPPORT_PREFIX
from starter.client.run_status import STUCK, description_stuck, stuck_reason
from starter.client.temporal_ids import fits
from workflows.domain.contracts import RefundOutcome
from workflows.domain.replies import refund_refused
from workflows.failures import public_reason
from workflows.options import CONVERSATION_TASK_TIMEOUT, ORDER_IDS, PENDING_APPROVAL, STEP
from workflows.refund.workflow import RefundWorkflow
from workflows.refund.standalone import RefundRequest

DIGEST_MEMO = "request_digest"
REQUEST_MEMO = "request"


class RefundStatus(BaseModel):
    """A refund's status: ``running``, ``awaiting_approval``, ``applied``, ``refused`` (a
    policy or business refusal, or a supervisor's rejection; ``reason`` says why),
    ``escalated`` (its outcome could not be shown: a ticket hands it to a human; ``reason``
    says why and whether the ticket opened), ``stuck`` (running, but its workflow tasks keep
    failing: nothing moves until an operator acts; ``reason`` says what fails and since when,
    ``starter.client.run_status``), or the
    closed run's Temporal status (``terminated``, ``timed_out``...): the words of the
    ``ProcessStatus`` search attribute that ``GET /refunds?status=`` filters on. ``step`` is the
    workflow's current step; ``operation`` and ``order_id`` as requested. ``replayed``: the
    system of record answered the write from its ledger (an earlier attempt, e.g. before a
    reset, had applied it once), not whether this request repeated an earlier one (a
    repeated ``POST /refunds`` answers the same ``refund_id``, whatever ``replayed`` says)."""

    refund_id: str
    status: str
    step: Optional[str] = None
    order_id: Optional[str] = None
    operation: Optional[str] = None
    reason: Optional[str] = None
    pending_approval: Optional[str] = None
    replayed: bool = False
    amount: Optional[Decimal] = None
    """The money the write sends back to the customer, decimal currency, from the order as the
    refund freshly read it; None before that read, for a write that sends none back, or when
    no worker could answer just then (``RefundWorkflow``'s ``summary`` query)."""


class RefundCalls(ClientCore):
    """The refund operations of ``StatekeeperClient``."""

    _client: Client
    _write_timeout: float

    def _policy(self) -> dict[str, Any]:  # overridden by StatekeeperClient
        return {}

    async def request_refund(self, request: RefundRequest,
                             search_attributes: Sequence[SearchAttributePair] = ()) -> RefundStatus:
        """Start the refund of ``request`` (or find the run of an identical earlier request),
        with ``search_attributes`` set at its start (e.g. its ``Tenant``).

        Raises ``ConversationError``: ``invalid`` (arguments the tool does not take or
        misses), ``conflict`` (the request id was used with other arguments), ``no_worker``,
        ``unavailable``."""
        try:
            refund_input = request.refund_input(self._write_timeout).model_copy(update=self._policy())
        except (ValidationError, ValueError) as err:
            raise ConversationError(f"{request.operation} request does not fit its tool {request.tool}: "
                                    f"{_errors(err, request.tool)}", "invalid") from err
        refund_id = request.refund_id()
        existing = await self._existing(refund_id, request)
        if existing is not None:
            return existing
        await self.require_worker()  # before starting: a refused start leaves nothing behind
        try:
            await self.bounded(self._client.start_workflow(
                RefundWorkflow.run, refund_input, id=refund_id, task_queue=self._task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                task_timeout=CONVERSATION_TASK_TIMEOUT,  # its fresh reads are local activities
                memo={DIGEST_MEMO: request.digest(), REQUEST_MEMO: request.model_dump(mode="json")},
                search_attributes=TypedSearchAttributes([SearchAttributePair(ORDER_IDS, [request.order_id]),
                                                         *search_attributes]),
                static_summary=f"standalone {request.operation} of order {request.order_id} "
                               f"(request {request.request_id}, store {request.store})",
                priority=tenant_priority(search_attributes), rpc_timeout=self.rpc_timeout))
        except WorkflowAlreadyStartedError:
            # a concurrent identical request won the race: compare with what it started
            found = await self._existing(refund_id, request)
            if found is not None:
                return found
            raise
        except RPCError as err:
            raise unreachable() from err
        return RefundStatus(refund_id=refund_id, status="running", order_id=request.order_id,
                            operation=request.operation)

    async def _existing(self, refund_id: str, request: RefundRequest) -> Optional[RefundStatus]:
        """The run of an earlier request with this id, None if there is none; ``conflict``
        if that request differed."""
        try:
            found, memo = await self._status(refund_id)
        except ConversationError as err:
            if err.kind == "not_found":
                return None
            raise
        if memo.get(DIGEST_MEMO) != request.digest():
            raise ConversationError(f"request {request.request_id} was already made with other arguments; use a "
                                    "new request_id for a different request", "conflict")
        return found

    async def refund(self, refund_id: str) -> RefundStatus:
        """The status of refund ``refund_id``, with its ``amount``. Raises ``ConversationError``
        ``not_found`` or ``unavailable``."""
        status = (await self._status(refund_id))[0]
        if status.status != STUCK:  # a stuck run answers no query
            status.amount = await self._amount(refund_id)
        return status

    async def _amount(self, refund_id: str) -> Optional[Decimal]:
        """The refund's amount (its ``summary`` query), None when it cannot be read now: no
        worker polls, or none answers in time (the status does not wait for it)."""
        handle = self._client.get_workflow_handle_for(RefundWorkflow.run, refund_id)
        try:
            if not await self.worker_polling():
                return None
            summary = await self.read(lambda: handle.query(RefundWorkflow.summary, rpc_timeout=self.rpc_timeout))
        except (RPCError, WorkflowQueryFailedError, ConversationError):
            return None
        return summary.amount

    async def _status(self, refund_id: str) -> tuple[RefundStatus, dict[str, Any]]:
        if not fits(refund_id):  # empty or longer than Temporal holds: no refund has it (asked, a 503)
            raise ConversationError(f"refund {refund_id[:80]} does not exist", "not_found")
        handle = self._client.get_workflow_handle_for(RefundWorkflow.run, refund_id)
        try:
            description = await self.read(lambda: handle.describe(rpc_timeout=self.rpc_timeout))
            memo = await description.memo()
        except RPCError as err:
            if err.status is RPCStatusCode.NOT_FOUND:
                raise ConversationError(f"refund {refund_id} does not exist", "not_found") from err
            raise unreachable() from err
        if description.workflow_type != RefundWorkflow.__name__:
            # a conversation's (or any other process's) workflow id is not a refund: read as one,
            # a finished conversation's outcome failed to decode (a 500 with pydantic's text in
            # the log) and a running one was reported as a refund 'running'
            raise ConversationError(f"refund {refund_id} does not exist", "not_found")
        requested = memo.get(REQUEST_MEMO) or {}
        attributes = description.typed_search_attributes
        status = RefundStatus(refund_id=refund_id, status="running", step=attributes.get(STEP),
                              order_id=requested.get("order_id") or next(iter(attributes.get(ORDER_IDS) or []), None),
                              operation=requested.get("operation"), pending_approval=attributes.get(PENDING_APPROVAL))
        stuck, problems, attempt = description_stuck(description)
        if stuck:  # running to Temporal, but nothing in it moves until an operator acts
            since = await self.stuck_since(refund_id, description.run_id)
            status.status, status.reason = STUCK, stuck_reason(f"refund {refund_id}", problems, attempt, since)
        elif description.status == WorkflowExecutionStatus.RUNNING:
            status.status = "awaiting_approval" if status.pending_approval else "running"
        elif description.status == WorkflowExecutionStatus.COMPLETED:
            try:
                outcome: RefundOutcome = await self.read(lambda: handle.result(rpc_timeout=self.rpc_timeout))
            except RPCError as err:
                raise unreachable() from err
            # the same words as the ProcessStatus search attribute the list route filters on
            status.status = "applied" if outcome.ok else "escalated" if outcome.escalated else "refused"
            status.reason, status.replayed = _reason(outcome), outcome.replayed
        else:
            status.status = description.status.name.lower() if description.status else "unknown"
            status.reason = ENDED_REASONS.get(status.status)
            if description.status == WorkflowExecutionStatus.FAILED:
                status.reason = await self._failed_because(handle, description.parent_id) or status.reason
        return status, memo

    async def _failed_because(self, handle: Any, parent_id: Optional[str]) -> Optional[str]:
        """Why a refund's run failed, worded from the failure's kind (``public_reason``, never
        its text), and, for a conversation's refund, who has the case: a "failed" refund with
        no reason read as nothing done, when its write's outcome was unknown and its
        conversation had escalated it (its retail write had applied)."""
        try:
            await self.read(lambda: handle.result(follow_runs=False, rpc_timeout=self.rpc_timeout))
        except WorkflowFailureError as err:
            said = f"its run failed: {public_reason(err.cause)}"
            if parent_id:  # named by its conversation id, as the API names conversations
                said += f"; its conversation {parent_id.removeprefix(SUPPORT_PREFIX)} has the case: see its state"
            return said
        except (RPCError, ConversationError):
            pass
        return None


ENDED_REASONS = {
    "failed": "the refund stopped on an error before it finished; nothing after that point ran (operators see "
              "the error in the Temporal Web UI; a write it had started is in the system of record's ledger)",
    "terminated": "an operator stopped the refund; nothing after that point ran (a write it had started is in the "
                  "system of record's ledger)",
    "timed_out": "the refund ran out of time; nothing after that point ran",
    "canceled": "the refund was cancelled before it finished; nothing after that point ran (a write it had "
                "started is in the system of record's ledger)",
}
"""``reason`` of a refund whose run Temporal ended (its own words for it: none). Never the
failure's text: it names exceptions and internal ids."""


def _reason(outcome: RefundOutcome) -> Optional[str]:
    """Why a finished refund did not apply: the escalation's reason (worded for the caller), or
    the refusal's, else (a write the system of record itself refused, e.g. an order cancelled by
    another request while this one awaited approval) the system's answer, which the outcome
    carries only in ``result``; a refusal worded for the model (clause id, hints, ids) as the
    caller's sentence (``replies.refund_refused``); None for an applied refund."""
    if outcome.ok:
        return None
    if outcome.escalation_reason:
        return outcome.escalation_reason
    return refund_refused(outcome.refused_reason or outcome.result) or None


def _errors(err: Exception, tool: str = "", most: int = 5) -> str:
    """Every validation message (at most ``most``), each with the field it names (not the
    ``tool`` the union chose), without pydantic's wording of types and URLs: a caller missing
    two fields hears of both at once."""
    if not isinstance(err, ValidationError):
        return str(err)
    reasons = []
    for error in err.errors():
        where = ".".join(str(p) for p in error.get("loc", ()) if p not in ("arguments", tool))
        reason = f"{where}: {error.get('msg', '')}".strip(": ")
        if reason not in reasons:
            reasons.append(reason)
    return "; ".join(reasons[:most]) + (f"; and {len(reasons) - most} more" if len(reasons) > most else "")
