"""Running a confirmed write: an activity of the conversation, or its own child
``RefundWorkflow`` when it moves money (the spec's ``execution``); and escalation to a
human when its outcome cannot be shown.

An activity or child whose retries run out leaves the outcome unknown: the write may
have committed. It is never replayed blindly; the conversation stops and a ticket
hands it to a human (the ticket key derives from the write's idempotency key).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Callable, Optional

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
)

from workflows.domain import keys, replies

from workflows.domain.policy import read_before_write
from workflows.domain import transitions as tr
from workflows.domain.actions import read_of
from workflows.activity_api import ToolActivitiesApi
from workflows.domain.catalogue import Execution, spec_of
from workflows.domain.policy.approvals import ApprovalPolicy
from workflows.domain.policy.clauses import Rule
from workflows.conversation.compensation import before_image, usable_before_image
from workflows.domain.contracts import (
    CancelRequest,
    Outcome,
    ReadToolRequest,
    RefundInput,
    TicketRequest,
    ToolResult,
    WriteToolRequest,
)
from workflows.domain.errors import ErrorType
from workflows.failures import ORDER_SYSTEM, TICKET_SYSTEM, application_cause, log_detail, public_reason
from workflows.interrupts import Interrupted, cancellable, local_failure_as_activity_error
from workflows.ledger_lookup import recorded_under
from workflows.options import (CONVERSATION_TASK_TIMEOUT, HEARTBEAT_TIMEOUT, READ_RETRY,
                               READ_TIMEOUT, TENANT, WRITE_RETRY)
from workflows.refund.workflow import RefundWorkflow
from workflows.domain.state import ConversationState, PendingConfirmation
from workflows.visibility import call_summary

CHILD_START_ATTEMPTS = 30
CHILD_START_BACKOFF = timedelta(seconds=2)
"""A refund child whose id is still running (a reset re-executed its parent) is waited for:
a new run then finds the first run's outcome in the ledger."""


def failure_reason(err: BaseException, system: str = ORDER_SYSTEM) -> str:
    """Why an activity or child of ``system`` failed, worded from the failure's kind
    (``workflows.failures.public_reason``: "the order system could not be reached"), for the
    state and the model; the exception's own text goes only to the worker's log, redacted."""
    workflow.logger.warning("%s failed: %s", system, log_detail(err))
    return public_reason(err, system)


def _failed_with(err: BaseException, error_type: ErrorType) -> bool:
    """True when our activity raised ``error_type`` under the Temporal wrappers of ``err``."""
    cause = application_cause(err)
    return isinstance(cause, ApplicationError) and cause.type == error_type.value


async def read(state: ConversationState, call, summary_prefix: str = "",
               cancel_requested: Optional[Callable[[], Optional[CancelRequest]]] = None) -> ToolResult:
    """Run a read tool, scoped to the authenticated customer, as a local activity: a read takes
    under a millisecond, and as an activity it would cost a server round trip, a workflow task
    and six history events (bench/turns.py); as a local activity it runs inside the workflow
    task that asked for it and leaves one marker. Raises ``ActivityError`` when its retries
    run out, and ``Interrupted`` when ``cancel_requested`` reports a cancel before it finishes
    (the read is then cancelled)."""
    request = ReadToolRequest(store=state.store, call=call, system_of_record=state.system_of_record,
                              scope_user_id=state.customer.user_id if state.customer else None)
    handle = workflow.start_local_activity_method(ToolActivitiesApi.run_read_tool, request,
                                                  start_to_close_timeout=READ_TIMEOUT, retry_policy=READ_RETRY,
                                                  summary=call_summary(call, summary_prefix))
    result = await local_failure_as_activity_error(
        cancellable(handle, cancel_requested) if cancel_requested else handle, "run_read_tool")
    tr.bind_system_of_record(state, result)
    return result


async def open_ticket(state: ConversationState, summary: str, ticket_key: str,
                      operation_id: Optional[str] = None) -> bool:
    """Open a human-agent ticket (about the write ``operation_id``, if any; noted as
    ``tr.ticket_opened``); False if it could not be opened (the conversation still closes, and
    its ``Step`` search attribute tells operators it needs a human). True also when the
    ticketing system already held it (opened by an earlier run; a reset re-executed the
    hand-off): a human has it all the same."""
    try:
        await workflow.execute_activity_method(  # False: held already, opened by an earlier run
            ToolActivitiesApi.open_ticket,
            TicketRequest(store=state.store, ticket_key=ticket_key,
                          user_id=state.customer.user_id if state.customer else None, summary=summary),
            heartbeat_timeout=HEARTBEAT_TIMEOUT, start_to_close_timeout=READ_TIMEOUT,
            retry_policy=READ_RETRY,
            summary="open a human-agent ticket",
        )
    except ActivityError as err:
        tr.reject(state, Rule.TOOL_ERROR.value, f"opening the ticket failed: {failure_reason(err, TICKET_SYSTEM)}")
        return False
    tr.ticket_opened(state, ticket_key, operation_id)
    return True


def escalation_summary(reason: str, withdrawn: list[str]) -> str:
    """The escalation ticket's summary: why, and the confirmed writes (their details) that
    were awaiting a supervisor and are withdrawn by the escalation."""
    if not withdrawn:
        return reason
    return f"{reason}. Also confirmed by the user, awaiting approval, not made: {'; '.join(withdrawn)}"


async def execute_confirmed(state: ConversationState, pending: PendingConfirmation, write_timeout_seconds: float,
                            cancel_requested: Callable[[], Optional[CancelRequest]] = lambda: None,
                            approvals: Optional[ApprovalPolicy] = None,
                            approved_by: Optional[str] = None) -> Optional[str]:
    """Run ``pending`` (the user confirmed it). Returns None when the write reached the
    system of record (applied or refused: the model is asked what to say next), or the
    reply that ends the turn when nothing was written because the order changed since it
    was confirmed, or when its outcome is unknown and the conversation escalated.
    Raises ``Interrupted`` when a cancel arrives before the write starts (it then never
    starts); once started, the write is awaited whatever arrives. A refund child gets
    ``approvals`` (the conversation's policy) and ``approved_by`` (the supervisor who
    approved this exact operation, if one did)."""
    call, operation = pending.call, pending.operation_id
    key = keys.idempotency_key(call, operation)
    spec = spec_of(call.name)
    tr.start_write(state, pending)
    try:
        undo, document = await before_image(state, call, cancel_requested)
        if cancel_requested() is not None:
            raise Interrupted()
    except Interrupted:
        tr.write_not_started(state, pending)
        raise
    if document is not None and read_before_write.changed(state, call, document):
        # the order the user confirmed is not the one there now: nothing is written
        tr.apply_write_result(state, call, operation, key, read_before_write.CHANGED_RESULT, False, None, None)
        tr.apply_read_result(state, read_of("order_id", document["order_id"]),
                             json.dumps(document))  # the model sees the order as it is now
        return replies.CHANGED_SINCE_CONFIRMED
    child_id: Optional[str] = None
    try:
        if spec.execution is Execution.REFUND_WORKFLOW:
            child_id, result = await _run_refund(state, pending, write_timeout_seconds,
                                                 approvals or ApprovalPolicy(), approved_by)
        else:
            result = await workflow.execute_activity_method(
                ToolActivitiesApi.run_write_tool,
                WriteToolRequest(store=state.store, call=call, idempotency_key=key,
                                 system_of_record=state.system_of_record),
                heartbeat_timeout=HEARTBEAT_TIMEOUT, start_to_close_timeout=timedelta(seconds=write_timeout_seconds),
                retry_policy=WRITE_RETRY,
                summary=call_summary(call),
            )
    except (ActivityError, ChildWorkflowError, WorkflowAlreadyStartedError) as err:
        # known not applied: the key already holds another call (e.g. a reset re-proposed the
        # turn), or every attempt reached a worker on another database, which refused first
        if _failed_with(err, ErrorType.IDEMPOTENCY_KEY_CONFLICT):
            result = ToolResult(result="Error: this step already holds a different change (the conversation was "
                                       "reset); propose the change again to make it", outcome=Outcome.REFUSED)
        elif _failed_with(err, ErrorType.INVALID_DATA):
            # deterministic: the system refused the values and wrote nothing; said as it is
            result = ToolResult(result=f"Error: {failure_reason(err)}", outcome=Outcome.REFUSED)
        elif _failed_with(err, ErrorType.WRONG_SYSTEM_OF_RECORD):
            result = ToolResult(result="Error: only workers on another system of record were available; the "
                                       "change was not made", outcome=Outcome.REFUSED)
        else:
            result = ToolResult(result=failure_reason(err), outcome=Outcome.UNKNOWN)
    if result.outcome is Outcome.UNKNOWN:
        # asked once more, by the write's key, before anyone is told it failed
        result = await _recheck(state, call, key) or result
    if result.outcome is Outcome.UNKNOWN:
        reason = f"{call.name} could not be shown to have completed ({result.result}); escalated to a human agent"
        tr.outcome_unknown(state, pending, reason)
        # confirmed writes awaiting a supervisor are withdrawn by the close: the human and the user hear of them
        withdrawn = [c.detail for c in state.awaiting_approval]
        opened = await open_ticket(state, escalation_summary(reason, withdrawn), keys.escalation_ticket_key(key),
                                   pending.operation_id)
        tr.escalate(state, pending, reason if opened else f"{reason}; no ticket could be opened")
        # without a ticket no human has the case yet: operators find it by its Step and Status
        return replies.escalated(withdrawn, ticket_opened=opened)
    tr.apply_write_result(state, call, operation, key, result.result, result.ok, child_id,
                          usable_before_image(call, undo, result.replayed))
    if not result.ok and result.result == read_before_write.CHANGED_RESULT:
        return replies.CHANGED_SINCE_CONFIRMED  # nothing was written; the state tells the model why
    if (result.ok and spec.execution is Execution.REFUND_WORKFLOW and state.customer is not None
            and cancel_requested() is None):  # after a cancel nothing new starts, not even a read
        await _refresh_customer(state, cancel_requested)
    return None


async def _recheck(state: ConversationState, call, key: str) -> Optional[ToolResult]:
    """The write's outcome as the system of record holds it under ``key`` (applied or refused),
    asked once more before anyone is told it failed; None when it holds none or cannot say."""
    request = WriteToolRequest(store=state.store, call=call, idempotency_key=key,
                               system_of_record=state.system_of_record)
    return await recorded_under(request, f"re-check {call.name} by its key before escalating")


async def _run_refund(state: ConversationState, pending: PendingConfirmation, write_timeout_seconds: float,
                      approvals: ApprovalPolicy, approved_by: Optional[str]) -> tuple[str, ToolResult]:
    """Run the write as a child ``RefundWorkflow``; returns (its workflow id, its outcome)."""
    assert state.customer is not None
    call = pending.call
    order_id = call.arguments.order_id
    child_id = keys.refund_workflow_id(state.store, order_id, pending.operation_id)
    confirmed, method_id = read_before_write.confirmed(state, call)
    refund = RefundInput(store=state.store, operation_id=pending.operation_id, call=call,
                         expected_user_id=state.customer.user_id, notify_email=state.customer.email or None,
                         conversation_id=state.conversation_id, write_timeout_seconds=write_timeout_seconds,
                         approvals=approvals, approved_by=approved_by, system_of_record=state.system_of_record,
                         confirmed_fingerprint=confirmed, confirmed_method_id=method_id)
    attributes = _child_attributes()
    for attempt in range(CHILD_START_ATTEMPTS):
        try:
            outcome = await workflow.execute_child_workflow(
                RefundWorkflow.run, refund, id=child_id, parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                static_summary=f"{call.name} {order_id}", search_attributes=attributes,
                # its fresh reads are local activities: a dead worker is noticed at this timeout
                task_timeout=CONVERSATION_TASK_TIMEOUT,
            )
            break
        except WorkflowAlreadyStartedError:
            if attempt == CHILD_START_ATTEMPTS - 1:
                raise
            await workflow.sleep(CHILD_START_BACKOFF)
    outcome_kind = Outcome.APPLIED if outcome.ok else Outcome.REFUSED
    return child_id, ToolResult(result=outcome.result, outcome=outcome_kind, replayed=outcome.replayed)


def _child_attributes() -> Optional[TypedSearchAttributes]:
    """The refund child's search attributes: the conversation's ``Tenant`` (set at its start,
    never upserted, so the same on every replay), that the child belongs to the same tenant;
    None for a conversation without one."""
    tenant = workflow.info().typed_search_attributes.get(TENANT)
    if tenant is None:
        return None
    return TypedSearchAttributes([SearchAttributePair(TENANT, tenant)])


async def _refresh_customer(state: ConversationState,
                            cancel_requested: Callable[[], Optional[CancelRequest]]) -> None:
    """Refunds move gift-card balances: re-read the customer so the next check sees the
    system of record. If that fails the write is still done and recorded; stale balances
    only make the policy stricter until the next read."""
    assert state.customer is not None
    refresh = read_of("user_id", state.customer.user_id)
    try:
        tr.apply_read_result(state, refresh, (await read(state, refresh, "refresh", cancel_requested)).result)
    except Interrupted:
        pass  # cancelled meanwhile: the write is recorded; the balances are only stale
    except ActivityError as err:
        tr.reject(state, Rule.TOOL_ERROR.value, f"refreshing the customer failed: {failure_reason(err)}",
                  tr.proposal_of(refresh))
