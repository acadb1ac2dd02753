"""``RefundWorkflow``: one refund-type write (a tool the catalogue runs as
``Execution.REFUND_WORKFLOW``), owning its steps: ledger lookup by key → fresh read of the
order → execute → notify.

Started as a child of the support conversation with an id derived from business
identity (``workflows.domain.keys.refund_workflow_id``), or directly by a backend service. The
fresh read re-checks the status precondition against the system of record, because the
conversation's copy of the order may be stale by the time the user says yes.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any, Optional

from temporalio import workflow
from temporalio.exceptions import ActivityError

from workflows.domain import keys

from workflows.domain.policy import read_before_write

from workflows.refund import standalone
from workflows.domain.actions import read_of
from workflows.activity_api import ToolActivitiesApi
from workflows.refund.approval_gate import HANDED_OVER_REASON, NO_TICKET, ApprovalGate
from workflows.refund.events import RefundEvents, clause_of
from workflows.domain.journal import EventType
from workflows.domain.policy.approvals import Approval, ApprovalDecision, ApprovalStatus
from workflows.domain.catalogue import spec_of
from workflows.domain.catalogue.checks import status_refusal
from workflows.failures import log_detail
from workflows.interrupts import local_failure_as_activity_error
from workflows.domain.contracts import (
    EmailRequest,
    ReadToolRequest,
    RefundInput,
    RefundOutcome,
    ToolResult,
    WriteToolRequest,
)
from workflows.options import (
    HEARTBEAT_TIMEOUT,
    READ_RETRY,
    READ_TIMEOUT,
    WRITE_RETRY,
)
from workflows.refund.view import RefundSummary, RefundView, amount_from_read, outcome_text
from workflows.visibility import pseudonym_of


@workflow.defn
class RefundWorkflow:
    """Input ``RefundInput``; returns ``RefundOutcome``. Never raises for a business
    refusal: a failed precondition, a tool error, or a rejected or expired supervisor
    approval (``workflows.refund.approval_gate``) comes back as ``ok=False``."""

    def __init__(self) -> None:
        self._step = "starting"
        self._view: Optional[RefundView] = None
        self._events = RefundEvents()
        """The refund's public events (``workflows.refund.events``)."""
        self._gate = ApprovalGate(self._enter, self._parked)
        """The supervisor's approval, when the write needs one (``workflows.refund.approval_gate``)."""
        self._rule: Optional[str] = None
        """The rule of the refusal the refund ended with (``refund.completed``)."""

    @workflow.update(description="Approve or reject this refund's pending approval, as a named supervisor. "
                                 "Refused (ApprovalRefused) for an unknown id, an id bound to another "
                                 "operation, a second decision or an expired approval.")
    def decide_approval(self, decision: ApprovalDecision) -> Approval:
        """Record the supervisor's decision; returns the decided approval."""
        return self._gate.decide(decision)

    @decide_approval.validator
    def _validate_decision(self, decision: ApprovalDecision) -> None:
        self._gate.check(decision)

    @workflow.query(description="Every approval this refund asked for, with its status, approver and times.")
    def approvals(self) -> list[Approval]:
        """The refund's approvals (at most one), pending or decided."""
        return self._gate.approvals

    @workflow.query(description="What the API shows of this refund besides its status: the amount it sends back "
                                "to the customer and the sentence each approval is about.")
    def summary(self) -> RefundSummary:
        """The refund's ``RefundSummary`` (``amount`` None before the fresh read)."""
        return RefundSummary(amount=self._view.amount if self._view is not None else None,
                             approval_details=dict(self._gate.details))

    @workflow.query(description="The refund's current step: starting, ledger, fresh_read, refused, "
                                "awaiting_approval, execute, notify, done, failed or escalated.")
    def step(self) -> str:
        """The refund's current step: ledger, fresh_read, refused, awaiting_approval, execute, notify,
        done, failed, or escalated (a standalone request whose outcome could not be shown)."""
        return self._step

    def _enter(self, step: str, detail: str) -> None:
        """Move to ``step`` and show it to operators (``detail``: no personal data)."""
        self._step = step
        if self._view is not None:
            self._view.enter(step, detail, self._gate.approvals)

    def _parked(self, approval: Approval) -> None:
        """The refund waits for ``approval``: callers hear of it now, not when the refund ends."""
        self._events.approval(approval, EventType.APPROVAL_REQUESTED)
        self._events.flush()

    @workflow.run
    async def run(self, inp: RefundInput) -> RefundOutcome:
        """Ledger lookup by key → fresh read → precondition check → supervisor approval when
        required → idempotent write → customer email; its events go to the journal
        (``workflows.refund.events``), ``refund.completed`` last. Raises ``ActivityError`` when a
        conversation's refund cannot finish (its parent escalates): ``refund.completed`` is then
        ``failed``."""
        self._events.bind(workflow.info().workflow_id, inp.conversation_id, inp.operation_id, inp.call)
        self._events.customer(inp.expected_user_id)
        try:
            outcome = await self._run(inp)
        except ActivityError:
            self._events.completed("failed", self._amount(), "tool-error")
            await self._events.drain()
            raise
        status = "applied" if outcome.ok else ("escalated" if outcome.escalated else "refused")
        self._events.completed(status, self._amount(), self._rule)
        await self._events.drain()
        return outcome

    def _amount(self) -> Any:
        return self._view.amount if self._view is not None else None

    def _outcome(self, ok: bool, approval: Optional[Approval] = None) -> None:
        """The write's outcome as the system of record recorded it (applied or refused)."""
        self._events.operation(EventType.OPERATION_APPLIED if ok else EventType.OPERATION_REFUSED,
                               self._amount(), approval)
        if not ok:
            self._rule = "tool-error"

    async def _run(self, inp: RefundInput) -> RefundOutcome:
        order_id = inp.call.arguments.order_id
        spec = spec_of(inp.call.name)
        key = keys.idempotency_key(inp.call, inp.operation_id)
        self._view = RefundView(call=inp.call, operation_id=inp.operation_id)
        self._view.pseudonym = await pseudonym_of(inp.expected_user_id) if inp.expected_user_id else None
        self._view.publish()
        write = WriteToolRequest(store=inp.store, call=inp.call, idempotency_key=key,
                                 system_of_record=inp.system_of_record)

        if spec.outcome_lookup:
            # A run started again for the same operation (a reset, a restarted child) must not
            # re-check preconditions its own write already changed: the ledger answers first.
            self._enter("ledger", f"Looking up `{key}` in the system of record")
            try:
                recorded = await _recorded(write, f"look up {inp.call.name} {order_id} by its idempotency key")
            except ActivityError as err:
                # the key holds another call: a request id resent with other arguments once its
                # first run is gone from Temporal; nothing is written, so it is refused, not failed
                refusal = standalone.key_conflict_refusal(inp, err)
                if refusal is None:
                    raise
                return self._refuse(key, refusal, "the idempotency key holds another request", rule="key-conflict")
            if recorded is not None:
                self._outcome(recorded.ok)
                self._view.outcome = outcome_text(recorded.ok, recorded.result, replayed=True)
                self._enter("done" if recorded.ok else "failed", "already recorded in the ledger")
                return RefundOutcome(idempotency_key=key, result=recorded.result, ok=recorded.ok, replayed=True)

        self._enter("fresh_read", f"Reading order {order_id} from the system of record")
        try:
            read = await _fresh_read(
                ReadToolRequest(store=inp.store, call=read_of("order_id", order_id),
                                system_of_record=inp.system_of_record,
                                scope_user_id=inp.expected_user_id),
                f"fresh read of {order_id} before {inp.call.name}")
        except ActivityError as err:
            refusal = standalone.unknown_store_refusal(inp, err)
            if refusal is None:
                raise
            return self._refuse(key, refusal, "the system of record has no such store", rule="unknown-store")
        self._view.amount = amount_from_read(inp.call, read.result)
        if self._view.pseudonym is None and read.ok:
            # a standalone request names no customer: the order's owner is the customer, so the
            # refund is found by customer like the ones a conversation starts
            self._view.pseudonym = await pseudonym_of(json.loads(read.result).get("user_id", ""))
            self._view.publish()
            self._events.customer(json.loads(read.result).get("user_id"))
        refusal = self._precondition(inp, read)
        facts = None
        if refusal is None and standalone.is_standalone(inp):
            refusal, facts = await standalone.standalone_refusal(inp, read)  # the spec's own policy check
        if refusal is not None:
            return self._refuse(key, refusal, "precondition failed on the fresh read",
                                rule=clause_of(refusal) or "tool-error")
        if refusal is None and inp.confirmed_fingerprint is not None:
            refusal = await self._changed_since_confirmed(inp, read)
        if refusal is not None:
            return self._refuse(key, refusal, "the order changed after the user confirmed",
                                rule="changed-since-confirmed")
        facts = facts if facts is not None else standalone.order_state(inp, read)
        approval, refusal = await self._gate.await_approval(inp, read, key, facts)
        if approval is not None:
            self._decided(approval, refusal, key)
        if refusal is not None:
            return self._refuse(key, refusal, "supervisor approval not granted", approval,
                                rule=_approval_rule(approval, refusal))

        self._enter("execute", f"`{key}`")
        try:
            written, cancel_late = await _through_cancel(workflow.start_activity_method(
                ToolActivitiesApi.run_write_tool,
                write,
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                start_to_close_timeout=timedelta(seconds=inp.write_timeout_seconds),
                retry_policy=WRITE_RETRY,
                summary=f"{inp.call.name} {order_id}",
            ))
        except ActivityError as err:
            # a conversation's child fails and its parent escalates; a standalone request has no
            # parent: it escalates itself (ledger re-check, ticket, status ``escalated``)
            if not standalone.is_standalone(inp):
                self._events.operation(EventType.OPERATION_UNKNOWN, self._amount(), approval)
                raise
            escalated = await standalone.escalate_unknown(inp, write, read, err)
            self._escalated(escalated, key, approval)
            self._view.outcome = escalated.escalation_reason or outcome_text(escalated.ok, escalated.result, True)
            self._enter("escalated" if escalated.escalated else ("done" if escalated.ok else "failed"),
                        "outcome unknown: handed to a human agent" if escalated.escalated else "found in the ledger")
            return escalated
        self._outcome(written.ok, approval)
        notified = False
        if written.ok and spec.notify and inp.notify_email:
            self._enter("notify", f"Emailing the customer about their {spec.notify.kind}")
            notified = await _notify(
                ToolActivitiesApi.send_customer_email,
                EmailRequest(
                    store=inp.store,
                    message_key=keys.email_key(key),
                    to_email=inp.notify_email,
                    subject=f"Your {spec.notify.kind} request for order {order_id}",
                    body=spec.notify.body(order_id, json.loads(written.result)),
                ),
                heartbeat_timeout=HEARTBEAT_TIMEOUT, start_to_close_timeout=READ_TIMEOUT,
                retry_policy=READ_RETRY,
                summary=f"email {spec.notify.kind} instructions for {order_id}",
            )
        self._view.outcome = outcome_text(written.ok, written.result, written.replayed, notified) + (
            "; a cancel arrived while the write ran, too late to stop it" if cancel_late else "")
        self._enter("done" if written.ok else "failed", "write recorded in the system of record")
        return RefundOutcome(idempotency_key=key, result=written.result, ok=written.ok,
                             replayed=written.replayed, notified=notified, approval=approval)

    def _decided(self, approval: Approval, refusal: Optional[str], key: str) -> None:
        """The events of a supervisor's decision on ``approval``, or of its expiry (and its ticket)."""
        if approval.status is ApprovalStatus.EXPIRED:
            self._events.approval(approval, EventType.APPROVAL_EXPIRED)
            if refusal is not None and not refusal.endswith(NO_TICKET):
                self._events.ticket(keys.approval_expiry_ticket_key(key))
        elif approval.status in (ApprovalStatus.APPROVED, ApprovalStatus.REJECTED):
            self._events.approval(approval, EventType.APPROVAL_DECIDED)

    def _escalated(self, outcome: RefundOutcome, key: str, approval: Optional[Approval]) -> None:
        """The events of a standalone write whose activity failed (``standalone.escalate_unknown``)."""
        if outcome.escalated:
            self._events.operation(EventType.OPERATION_UNKNOWN, self._amount(), approval)
            if not (outcome.escalation_reason or "").endswith(standalone.NO_TICKET_SUFFIX):
                self._events.ticket(keys.escalation_ticket_key(key))
        else:  # the ledger's answer, or a failure that proves nothing was written
            self._outcome(outcome.ok, approval)

    def _refuse(self, key: str, refusal: str, detail: str, approval: Optional[Approval] = None,
                rule: str = "tool-error") -> RefundOutcome:
        """End refused with ``refusal`` (the reason the caller reads), shown to operators with
        ``detail`` (no personal data), for ``rule`` (``refund.completed``); nothing was written."""
        self._rule = rule
        self._view.outcome = f"refused: {refusal}"
        self._enter("refused", detail)
        return RefundOutcome(idempotency_key=key, result=f"Error: {refusal}", ok=False, refused_reason=refusal,
                             approval=approval)

    async def _changed_since_confirmed(self, inp: RefundInput, read: ToolResult) -> Optional[str]:
        """``read_before_write.CHANGED_REASON`` when the order just read, or the payment method the
        write uses (read again here), differ from what the user confirmed; else None."""
        user_doc = None
        if inp.confirmed_method_id is not None and inp.expected_user_id is not None:
            user = await _fresh_read(
                ReadToolRequest(store=inp.store, call=read_of("user_id", inp.expected_user_id),
                                system_of_record=inp.system_of_record, scope_user_id=inp.expected_user_id),
                f"fresh read of the payment method before {inp.call.name}")
            user_doc = json.loads(user.result) if user.ok else {}
        now = read_before_write.fresh(json.loads(read.result), user_doc, inp.confirmed_method_id)
        return None if now == inp.confirmed_fingerprint else read_before_write.CHANGED_REASON

    @staticmethod
    def _precondition(inp: RefundInput, read: ToolResult) -> Optional[str]:
        if not read.ok:
            return read.result.removeprefix("Error: ")
        order = json.loads(read.result)
        if inp.expected_user_id is not None and order.get("user_id") != inp.expected_user_id:
            return "order not found (one-customer)"
        spec = spec_of(inp.call.name)
        failed = status_refusal(spec.name, spec.status, order["order_id"], order.get("status", ""),
                                len(order.get("payment_history", [])))
        return f"{failed[1]} ({failed[0].value})" if failed else None


def _approval_rule(approval: Optional[Approval], refusal: str) -> str:
    """The rule of a refusal at the approval gate (``workflows.refund.events.REFUSAL_RULES``)."""
    if approval is None:  # never parked: a human agent has it, or the ticketing system could not say
        return "handed-over" if refusal == HANDED_OVER_REASON else "ticket-check-failed"
    return "approval-rejected" if approval.status is ApprovalStatus.REJECTED else "approval-expired"


async def _through_cancel(write: Any) -> tuple[ToolResult, bool]:
    """The outcome of the started ``write`` activity, which a Temporal cancel of this run does not
    abandon (as a conversation's writes, ``SupportWorkflow.run``): an irreversible write in flight
    is not stopped halfway; True when such a cancel arrived. Raises ``ActivityError`` as the write does."""
    try:
        return await asyncio.shield(write), False
    except asyncio.CancelledError:
        workflow.logger.info("cancel requested while the write ran: the write finishes first")
        return await write, True


async def _recorded(write: WriteToolRequest, summary: str) -> Optional[ToolResult]:
    """The outcome recorded under ``write``'s idempotency key, or None. A local activity that
    moves nothing (``peek_recorded_write``) first asks whether the key was used at all; the
    ``find_recorded_write`` activity (which may move the money an applied write still owes)
    runs only when it was. A first run, nearly every run, saves that activity's three events,
    its activity task and the workflow task its completion needs. Raises ``ActivityError``
    when the ledger cannot be read or refuses the key."""
    used = await local_failure_as_activity_error(workflow.start_local_activity_method(
        ToolActivitiesApi.peek_recorded_write, write, start_to_close_timeout=READ_TIMEOUT,
        retry_policy=READ_RETRY, summary=summary), "peek_recorded_write")
    if not used:
        return None
    return await workflow.execute_activity_method(
        ToolActivitiesApi.find_recorded_write, write, heartbeat_timeout=HEARTBEAT_TIMEOUT,
        start_to_close_timeout=READ_TIMEOUT, retry_policy=READ_RETRY, summary=summary)


async def _fresh_read(request: ReadToolRequest, summary: str) -> ToolResult:
    """Run one read tool for the refund (the order, the payment method) as a local activity,
    inside the workflow task that asks for it (as an activity it would cost an activity task
    and a workflow task). The ledger lookup stays an activity where it may move money
    (``_recorded``). Raises ``ActivityError`` when the system of record cannot be read."""
    return await local_failure_as_activity_error(workflow.start_local_activity_method(
        ToolActivitiesApi.run_read_tool, request,
        start_to_close_timeout=READ_TIMEOUT, retry_policy=READ_RETRY, summary=summary), "run_read_tool")


async def _notify(*args, **kwargs) -> bool:
    """Send the customer email; False when it could not be sent (or whether it was is unknown):
    the write stays applied and its outcome is reported as it is."""
    try:
        return await workflow.execute_activity_method(*args, **kwargs)
    except ActivityError as err:
        workflow.logger.warning("customer email failed: %s", log_detail(err))
        return False
