"""Approvals for supervisors: reading one (``approval``) or the pending ones
(``approval_items``, for ``ListingCalls.list_pending_approvals``), and a decision on a pending
approval, sent as the ``decide_approval`` update of the process that waits for it (a
conversation or a refund).

An approval is read from its process through queries: a conversation's ``state``
(``approvals``; the detail of its write from ``awaiting_approval`` while it waits, then from
the write's step), a refund's ``approvals`` and ``summary`` (the detail, worded from its fresh
reads). Payment method ids in a detail are shown as the customer sees them
(``workflows.domain.policy.approvals.public_detail``).

The approval id names its workflow (``workflows.domain.policy.approvals.workflow_id_of``:
``<workflow_id>~<12 hex>``); the workflow's update validator is the authority on whether
the decision is allowed (unknown id, another operation's id, second decision, expiry →
``ApprovalRefused``, a 409 here).
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from decimal import Decimal
from typing import Any, Awaitable, Callable, Literal, Optional, Sequence

from pydantic import BaseModel
from temporalio.client import Client, WorkflowQueryFailedError, WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.service import RPCError, RPCStatusCode

from starter.client.core import ClientCore
from starter.client.errors import ConversationError, outcome_unknown, unreachable
from starter.client.temporal_ids import fits, update_id
from workflows.domain.policy.approvals import (Approval, ApprovalDecision, ApprovalStatus, plain_reason,
                                               public_detail, workflow_id_of)
from workflows.domain.errors import ErrorType
from workflows.domain.state import ConversationState
from workflows.domain.user_text import control_problem
from workflows.refund.view import RefundSummary
from workflows.refund.workflow import RefundWorkflow

APPROVAL_REFUSED = ErrorType.APPROVAL_REFUSED.value
APPROVAL_UNKNOWN = ErrorType.APPROVAL_UNKNOWN.value


def approval_workflow_id(approval_id: str) -> str:
    """The workflow an approval id belongs to. Raises ``ConversationError`` ``not_found``
    for an id that is not one (no approval can have it)."""
    try:
        workflow_id = workflow_id_of(approval_id)
    except ValueError as err:
        raise ConversationError(f"approval {_shown(approval_id)} does not exist", "not_found") from err
    if not fits(workflow_id):  # longer than Temporal holds: no process has it (asked, it was a 503)
        raise ConversationError(f"approval {_shown(approval_id)} does not exist", "not_found")
    return workflow_id


def decision_payload(approval_id: str, decision: str, approver: str, note: Optional[str]) -> ApprovalDecision:
    """The update's input, validated here (``invalid`` on a bad field, or a note with a
    control character)."""
    problem = control_problem(note, "the note") if note is not None else None
    if problem is not None:
        raise ConversationError(problem, "invalid")
    fields = {"approval_id": approval_id, "decision": decision, "approver": approver, "note": note}
    try:
        return ApprovalDecision(**fields)
    except ValueError as err:
        raise ConversationError("invalid decision: decision is approve or reject; approver is an id of "
                                "1 to 128 characters; note at most 1000", "invalid") from err


def _shown(approval_id: str) -> str:
    """An approval id as quoted back in an error: caller-supplied text, so bounded."""
    return approval_id if len(approval_id) <= 80 else approval_id[:77] + "..."


SUPPORT_PREFIX = "support-"
"""The workflow id prefix of a conversation (``workflows.conversation.workflow.support_workflow_id``)."""
READS_AT_ONCE = 8
"""A page of pending approvals reads at most this many processes at a time."""
LIST_READ_SECONDS = 3.0
"""How long a list waits for one process's answer: a process no worker answers for (its queue
unpolled, its workflow tasks failing) would otherwise hold the whole page for the RPC deadline."""


class ApprovalOperation(BaseModel):
    """The write an approval is for: ``tool`` (the write's name, as in the decided
    ``Approval``), ``order_id``, ``detail`` (the sentence the user confirmed, word for word but
    for payment method ids, shown as the customer sees them: "visa ending 1234"; for a
    standalone refund, the same sentence worded from its fresh reads; None when its process
    no longer holds it) and ``amount`` (the money the write moves, decimal currency, as the
    approval rules judged it)."""

    tool: str
    order_id: str
    detail: Optional[str] = None
    amount: Decimal


class ApprovalItem(BaseModel):
    """An approval as a supervisor reads it (``GET /approvals/{approval_id}`` and each item of
    ``GET /approvals``). ``process`` is ``conversation`` or ``refund``; ``process_id`` its
    conversation id or refund id. ``status``: pending, approved, rejected, expired or
    withdrawn. ``reason``: why a supervisor must decide, in plain words, one sentence per rule.
    Times are UTC: ``requested_at``, ``expires_at`` (a pending approval is handed to a human
    agent then). ``decided_by`` and ``decided_at``: the supervisor and the time of the decision
    (kept when an approved write is withdrawn); an expired approval has ``decided_at`` its
    expiry and no ``decided_by``; both None while pending and for one withdrawn undecided.

    In a list, an approval whose process could not be read just then (no worker, its workflow
    tasks failing) carries only its ids and ``status`` pending; the other fields are None
    (``GET /approvals/{approval_id}`` says why it cannot be read)."""

    approval_id: str
    process: Literal["conversation", "refund"]
    process_id: str
    status: ApprovalStatus = ApprovalStatus.PENDING
    operation: Optional[ApprovalOperation] = None
    reason: Optional[str] = None
    requested_at: Optional[datetime] = None
    expires_at: Optional[datetime] = None
    decided_by: Optional[str] = None
    decided_at: Optional[datetime] = None


def process_of(workflow_id: str) -> tuple[Literal["conversation", "refund"], str]:
    """``(process, process_id)`` of a workflow that issues approvals."""
    if workflow_id.startswith(SUPPORT_PREFIX):
        return "conversation", workflow_id.removeprefix(SUPPORT_PREFIX)
    return "refund", workflow_id


def approval_item(approval: Approval, detail: Optional[str]) -> ApprovalItem:
    """What a supervisor reads of ``approval``, with the ``detail`` of its write."""
    process, process_id = process_of(approval.workflow_id)
    return ApprovalItem(
        approval_id=approval.approval_id, process=process, process_id=process_id, status=approval.status,
        operation=ApprovalOperation(tool=approval.tool, order_id=approval.order_id, detail=detail,
                                    amount=approval.amount),
        reason=plain_reason(approval.reasons), requested_at=approval.requested_at, expires_at=approval.expires_at,
        decided_by=approval.approver, decided_at=approval.decided_at)


def conversation_items(state: ConversationState) -> list[ApprovalItem]:
    """Every approval of a conversation's ``state``; the detail is its awaiting write's, else
    that of the write's step (None once the step left the state's window)."""
    details = {step.operation_id: step.detail for step in state.steps if step.operation_id}
    details.update({confirmed.operation_id: confirmed.detail for confirmed in state.awaiting_approval})
    methods = {method_id: method.display for method_id, method in
               (state.customer.payment_methods if state.customer else {}).items()}
    for confirmed in state.awaiting_approval:
        given = getattr(confirmed.call.arguments, "payment_method_id", None)
        if given:
            methods.setdefault(given, "")
    items = []
    for approval in state.approvals:
        detail = details.get(approval.operation_id) or None
        items.append(approval_item(approval, public_detail(detail, methods) if detail else None))
    return items


def _missing(approval_id: str) -> ConversationError:
    return ConversationError(f"approval {_shown(approval_id)} does not exist", "not_found")


class ApprovalReads(ClientCore):
    """Reading approvals (``StatekeeperClient``'s ``approval``; ``approval_items`` for lists)."""

    _client: Client
    state: Callable[[str], Awaitable[ConversationState]]
    """``StatekeeperClient.state``: a conversation's state, its refusals worded."""

    async def approval(self, approval_id: str) -> ApprovalItem:
        """The approval ``approval_id`` as a supervisor reads it, pending or decided (also once
        its process finished, while Temporal retains it). Raises ``ConversationError``
        ``not_found`` (no such process, or an id it never issued), ``stuck`` (its process's
        workflow tasks keep failing), ``state_incompatible``, ``no_worker`` (reading a process
        needs a worker), ``unavailable`` or ``timeout``."""
        workflow_id = approval_workflow_id(approval_id)
        try:
            items = await self._process_items(workflow_id)
        except ConversationError as err:
            if err.kind == "not_found":
                raise _missing(approval_id) from err
            raise
        for item in items:
            if item.approval_id == approval_id:
                return item
        raise _missing(approval_id)

    async def approval_items(self, pending: Sequence[tuple[str, str, bool]]) -> list[ApprovalItem]:
        """Each ``(approval_id, workflow_id, readable)`` of ``pending`` as ``ApprovalItem``, in
        order, reading at most ``READS_AT_ONCE`` processes at a time, each for at most
        ``LIST_READ_SECONDS``. A process that is not ``readable`` (Temporal reports it stuck) is
        not asked; one that cannot be read in time leaves its item with its ids only."""
        gate = asyncio.Semaphore(READS_AT_ONCE)

        async def one(approval_id: str, workflow_id: str, readable: bool) -> ApprovalItem:
            items: list[ApprovalItem] = []
            if readable:
                async with gate:
                    try:
                        items = await asyncio.wait_for(self._process_items(workflow_id, known_refund=True),
                                                       LIST_READ_SECONDS)
                    except (ConversationError, asyncio.TimeoutError):
                        pass
            found = next((item for item in items if item.approval_id == approval_id), None)
            process, process_id = process_of(workflow_id)
            return found or ApprovalItem(approval_id=approval_id, process=process, process_id=process_id)

        return list(await asyncio.gather(*(one(*item) for item in pending)))

    async def _process_items(self, workflow_id: str, known_refund: bool = False) -> list[ApprovalItem]:
        """Every approval of ``workflow_id``'s process ([] when there is no such process)."""
        process, process_id = process_of(workflow_id)
        if process == "conversation":
            try:
                return conversation_items(await self.state(process_id))
            except ConversationError as err:
                if err.kind == "not_found":
                    return []
                raise
        return await self._refund_items(workflow_id, known_refund)

    async def _refund_items(self, workflow_id: str, known_refund: bool) -> list[ApprovalItem]:
        """A refund's approvals (``approvals`` query) with their details (``summary`` query:
        a worker of an earlier release does not know it, and the details are then None)."""
        handle = self._client.get_workflow_handle(workflow_id)
        if not known_refund:
            try:
                description = await self.read(lambda: handle.describe(rpc_timeout=self.rpc_timeout))
            except RPCError as err:
                if err.status is RPCStatusCode.NOT_FOUND:
                    return []
                raise unreachable() from err
            if description.workflow_type != RefundWorkflow.__name__:
                return []  # an approval id naming another kind of workflow: none was issued there
        approvals = await self._query(handle, workflow_id, RefundWorkflow.approvals, list[Approval])
        try:
            summary = await self._query(handle, workflow_id, RefundWorkflow.summary, RefundSummary)
        except ConversationError:
            summary = RefundSummary()
        return [approval_item(a, summary.approval_details.get(a.approval_id)) for a in approvals]

    async def _query(self, handle: Any, workflow_id: str, query: Any, result_type: Any) -> Any:
        """A refund's query, its failures worded: ``stuck`` when its workflow tasks keep failing,
        ``no_worker``, ``unavailable``, ``timeout``; ``not_found`` when it does not exist."""
        what = f"refund {workflow_id}"
        try:
            return await self.read(lambda: handle.query(query, result_type=result_type, rpc_timeout=self.rpc_timeout))
        except WorkflowQueryFailedError as err:
            raise (await self.stuck(workflow_id, what)
                   or ConversationError(f"{what} could not answer; retry later", "unavailable")) from err
        except RPCError as err:
            if err.status is RPCStatusCode.NOT_FOUND:
                raise ConversationError(f"{what} does not exist", "not_found") from err
            await self.require_worker()
            raise (await self.stuck(workflow_id, what) or unreachable()) from err
        except ConversationError as err:
            await self.require_worker()  # no worker: no_worker; else the worker is busy, or the run stuck
            raise (await self.stuck(workflow_id, what) or ConversationError(
                f"{what} did not answer within {self.deadlines.rpc_seconds:.0f} s; retry", "timeout")) from err


class ApprovalCalls(ApprovalReads):
    """The approval operations of ``StatekeeperClient``."""

    _client: Client

    async def decide_approval(self, approval_id: str, decision: str, approver: str,
                              note: Optional[str] = None) -> Approval:
        """Approve or reject ``approval_id`` as ``approver``; returns the decided ``Approval``.

        The update id is the decision itself, so a retried identical call returns the first
        answer. Raises ``ConversationError``: ``not_found`` (no such process, or an approval id
        it never issued, another operation's included), ``approval_refused`` (the validator's
        reason: already decided, withdrawn, expired), ``stuck`` (its process's workflow tasks
        keep failing), ``invalid``, ``no_worker``, and ``outcome_unknown`` when Temporal
        stopped answering while the decision was on its way (send the same decision again)."""
        workflow_id = approval_workflow_id(approval_id)
        payload = decision_payload(approval_id, decision, approver, note)
        handle = self._client.get_workflow_handle(workflow_id)
        try:
            return await self.run_update(
                lambda timeout: handle.start_update(
                    "decide_approval", payload, wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                    id=update_id("decide", approval_id, decision, approver), rpc_timeout=timeout, result_type=Approval),
                "the decision", unknown=outcome_unknown(
                    "the decision", f"send the same decision again ({decision} by {approver})"),
                stuck=lambda: self.stuck(workflow_id, f"the process of approval {_shown(approval_id)}"))
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            if getattr(cause, "type", None) == APPROVAL_REFUSED:
                raise ConversationError(getattr(cause, "message", "") or "decision refused",
                                        "approval_refused") from err
            # APPROVAL_UNKNOWN: the process never issued this id (another operation's included)
            why = f": {cause.message}" if getattr(cause, "type", None) == APPROVAL_UNKNOWN else ""
            raise ConversationError(f"approval {_shown(approval_id)} does not exist{why}", "not_found") from err
        except RPCError as err:
            text = str(err).lower()
            # a finished process answers NOT_FOUND too ("workflow execution already completed"):
            # its approval existed and can no longer be decided, which is a conflict, not a 404
            if "completed" in text or "closed" in text or "closing" in text:
                raise ConversationError(f"approval {_shown(approval_id)} is no longer pending: its process has finished",
                                        "approval_refused") from err
            if err.status is RPCStatusCode.NOT_FOUND or "not found" in text:
                raise ConversationError(f"approval {_shown(approval_id)} does not exist", "not_found") from err
            raise unreachable() from err
