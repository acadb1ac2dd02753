"""``RefundWorkflow``'s approval gate (workflow code, deterministic): after the fresh read,
a write that needs a supervisor (``workflows.domain.policy.approvals.required_approval``) records a
pending ``Approval``, shows it in the ``PendingApproval`` search attribute and waits for
the ``decide_approval`` update or a durable timer (``ApprovalPolicy.timeout_seconds``).

Before it is parked, the ticketing system is asked for the write's approval-expiry ticket (a
reset re-ran a refund whose approval had expired to a human): held → refused, the human agent
has it; the ticketing system cannot answer → refused too (fails closed: "no ticket" is not known).

Approve → the write runs. Reject → the refund is refused "rejected by <approver>".
Expiry → a human ticket is opened (key ``approval-expired:<write key>``, once; when it cannot
be, the reason says so: ``refund-expiry-without-ticket``) and the
refund is refused. ``PendingApproval`` is unset once the approval is decided or expired.
"""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from typing import TYPE_CHECKING, Callable, Optional

from temporalio import workflow
from temporalio.exceptions import ActivityError

from workflows.domain import keys
from workflows.domain.actions import read_of
from workflows.activity_api import ToolActivitiesApi
from workflows.domain.policy.approvals import (
    TICKET_LOOKUP_PATCH,
    Approval,
    ApprovalDecision,
    ApprovalStatus,
    apply_decision,
    check_decision,
    check_decision_text,
    expire,
    expiry_ticket_summary,
    open_approval,
    required_approval,
)
from workflows.domain.catalogue import spec_of
from workflows.domain.catalogue.amounts import money
from workflows.domain.catalogue.folds import order_fact
from workflows.domain.contracts import ReadToolRequest, TicketLookup, TicketRequest, ToolResult
from workflows.failures import log_detail
from workflows.options import HEARTBEAT_TIMEOUT, PENDING_APPROVAL, READ_RETRY, READ_TIMEOUT
from workflows.domain.records import OrderFact
from workflows.refund.standalone import write_detail

if TYPE_CHECKING:
    from workflows.domain.contracts import RefundInput
    from workflows.domain.state import ConversationState

NO_TICKET = "no human-agent ticket could be opened, so nothing has been changed and no one has it"
"""The end of the refusal reason of an expiry whose ticket could not be opened."""
UNCHECKED_REASON = ("whether a human agent already has this order could not be checked (the ticketing system "
                    "did not answer), so no approval was requested and nothing has been changed; send the "
                    "request again later with a new request_id")
"""The refusal when the look-up of the write's approval-expiry ticket failed: it fails closed."""
HANDED_OVER_REASON = ("this change's approval expired undecided in an earlier run and it was handed to a human "
                      "agent, who will follow up; nothing has been changed here")
"""The refusal when the ticketing system holds the write's approval-expiry ticket (a reset re-ran the
refund): the write is the human agent's, never parked for a supervisor beside them."""


async def _expiry_ticket_held(inp: RefundInput, write_key: str) -> Optional[bool]:
    """Whether the ticketing system holds the approval-expiry ticket of write ``write_key``
    (``find_ticket``, retried by ``READ_RETRY``); None when it could not be asked."""
    try:
        return await workflow.execute_activity_method(
            ToolActivitiesApi.find_ticket,
            TicketLookup(store=inp.store, ticket_key=keys.approval_expiry_ticket_key(write_key)),
            heartbeat_timeout=HEARTBEAT_TIMEOUT, start_to_close_timeout=READ_TIMEOUT, retry_policy=READ_RETRY,
            summary="ask the ticketing system whether a human agent already has this write")
    except ActivityError as err:
        workflow.logger.warning("ticket look-up before approval failed: %s", log_detail(err))
        return None


class ApprovalGate:
    """``RefundWorkflow``'s approvals (``approvals``: at most one), the checks and the
    decision of its ``decide_approval`` update (``check``, ``decide``: the workflow's handler
    delegates here), and ``await_approval`` for its run. ``enter(step, detail)`` moves the
    refund to a step and shows it to operators; ``parked(approval)`` hears of each approval the
    refund starts waiting for."""

    def __init__(self, enter: Callable[[str, str], None],
                 parked: Callable[[Approval], None] = lambda approval: None) -> None:
        self.approvals: list[Approval] = []
        self._parked = parked
        """Told each approval the moment the refund starts waiting for it (its events)."""
        self.details: dict[str, str] = {}
        """Approval id -> the sentence the approval is about, as a supervisor reads it
        (``standalone.write_detail``); in memory, rebuilt on replay from the reads' results."""
        self._enter = enter

    def check(self, decision: ApprovalDecision) -> None:
        """The update's validator: refuse (``ApprovalRefused``) an unknown id, an id bound to
        another operation, a second decision or an expired approval."""
        check_decision_text(decision)
        check_decision(self.approvals, decision, workflow.now())

    def decide(self, decision: ApprovalDecision) -> Approval:
        """Record the supervisor's decision; returns the decided approval."""
        # Checked again here: two decisions accepted in one workflow task both passed the validator.
        approval = check_decision(self.approvals, decision, workflow.now())
        apply_decision(approval, decision, workflow.now())
        return approval

    async def await_approval(self, inp: RefundInput, read: ToolResult, write_key: str,
                             facts: Optional[ConversationState]) -> tuple[Optional[Approval], Optional[str]]:
        """``(approval, refusal)``: ``(None, None)`` when no approval is needed or the
        conversation already obtained it (``inp.approved_by``); ``(approval, None)`` when a
        supervisor approved; ``(approval, reason)`` when rejected or expired. ``facts``: the
        fresh reads folded into a state, from which the approval's detail is worded."""
        if inp.approved_by is not None:
            return None, None
        order = order_fact(json.loads(read.result))
        prices = await self._new_prices(inp, order)
        needed = required_approval(inp.call, order, inp.approvals, prices)
        if needed is None:
            return None, None
        amount, reasons = needed
        if workflow.patched(TICKET_LOOKUP_PATCH):
            held = await _expiry_ticket_held(inp, write_key)
            if held is not False:  # a human agent has it, or the ticketing system could not say
                return None, HANDED_OVER_REASON if held else UNCHECKED_REASON
        approval = open_approval(workflow.info().workflow_id, inp.operation_id, inp.call, order, amount, reasons,
                                 workflow.now(), inp.approvals)
        self.approvals.append(approval)
        detail = write_detail(inp.call, facts)
        if detail is not None:
            self.details[approval.approval_id] = detail
        workflow.upsert_search_attributes([PENDING_APPROVAL.value_set(approval.approval_id)])
        self._enter("awaiting_approval",
                    f"Approval `{approval.approval_id}` of {inp.call.name} on {approval.order_id} "
                    f"({approval.amount}) awaits a supervisor until {approval.expires_at:%Y-%m-%d %H:%M:%S} UTC."
                    "\n\n" + "\n".join(f"- {reason}" for reason in reasons))
        self._parked(approval)
        try:
            await workflow.wait_condition(lambda: approval.status is not ApprovalStatus.PENDING,
                                          timeout=inp.approvals.timeout_seconds, timeout_summary="approval expiry")
        except asyncio.TimeoutError:
            expire(approval, workflow.now())
        workflow.upsert_search_attributes([PENDING_APPROVAL.value_unset()])
        if approval.status is ApprovalStatus.APPROVED:
            return approval, None
        if approval.status is ApprovalStatus.REJECTED:
            return approval, f"rejected by {approval.approver}"
        reason = (f"approval expired undecided after {inp.approvals.timeout_seconds:g} s; "
                  "handed to a human agent")
        try:
            await workflow.execute_activity_method(
                ToolActivitiesApi.open_ticket,
                TicketRequest(store=inp.store, ticket_key=keys.approval_expiry_ticket_key(write_key),
                              user_id=inp.expected_user_id, summary=expiry_ticket_summary(approval)),
                heartbeat_timeout=HEARTBEAT_TIMEOUT, start_to_close_timeout=READ_TIMEOUT, retry_policy=READ_RETRY,
                summary=f"ticket: approval of {inp.call.name} {approval.order_id} expired",
            )
        except ActivityError as err:
            # the ticketing system down past its retries: nothing was written, and no human agent
            # has it, so it is refused saying so (as a conversation does), not failed
            workflow.logger.warning("approval-expiry ticket failed: %s", log_detail(err))
            return approval, f"approval expired undecided after {inp.approvals.timeout_seconds:g} s; {NO_TICKET}"
        return approval, reason

    async def _new_prices(self, inp: RefundInput, order: OrderFact) -> dict[str, Decimal]:
        """Prices of the variants an item change moves to, freshly read from the system of
        record (the products of the changed items); empty for other writes. A product that
        cannot be read leaves its prices out (the approval then fails closed)."""
        args = inp.call.arguments
        if not spec_of(inp.call.name).prices_new_items:
            return {}
        by_id = {item.item_id: item.product_id for item in order.items}
        product_ids = sorted({by_id[item_id] for item_id in args.item_ids if item_id in by_id})
        prices: dict[str, Decimal] = {}
        for product_id in product_ids:
            read = await workflow.execute_activity_method(
                ToolActivitiesApi.run_read_tool,
                ReadToolRequest(store=inp.store, call=read_of("product_id", product_id),
                                system_of_record=inp.system_of_record,
                                scope_user_id=inp.expected_user_id),
                heartbeat_timeout=HEARTBEAT_TIMEOUT, start_to_close_timeout=READ_TIMEOUT, retry_policy=READ_RETRY,
                summary=f"read product {product_id} for the approval amount",
            )
            if read.ok:
                variants = json.loads(read.result).get("variants", {})
                prices.update({item_id: money(v["price"]) for item_id, v in variants.items()})
        return prices
