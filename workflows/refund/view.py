"""What operators see of a ``RefundWorkflow`` in the Temporal Web UI.

Search attributes ``CustomerId`` (the keyed pseudonym, from the worker: see
``workflows.visibility``), ``OrderIds`` (the one order), ``Step`` and ``Status``; current
details as readable Markdown: order, operation, step, amount, approval (pending, or
decided with the approver), outcome. Ids only: no customer id, email, name, address or
payment method id.

``Status`` of a refund: ``running`` until it finishes, then ``applied`` or ``refused``
(a business refusal: precondition, approval rejected or expired, the system's error), or
``escalated`` (a standalone request whose outcome could not be shown: a ticket hands it to
a human).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Optional, Sequence

from pydantic import BaseModel
from temporalio import workflow

from workflows.domain.actions import call_arguments
from workflows.domain.catalogue import spec_of
from workflows.domain.catalogue.folds import order_fact
from workflows.options import CUSTOMER_ID, ORDER_IDS, STEP
from workflows.visibility import describe_call, status_key, when

FINAL_STATUS = {"done": "applied", "refused": "refused", "failed": "refused", "escalated": "escalated"}
"""``Status`` by final step; any other step is ``running``."""
NOTE_CHARS = 300


def refund_amount(call: Any, order: dict[str, Any]) -> Optional[Decimal]:
    """The money the write sends to the customer, decimal currency, from the fresh read of
    the order: the tool spec's ``refund_amount`` (a cancel refunds the whole order, a return
    the returned items). None for a write without one (it depends on prices outside the
    order, or moves no money back) or an order document missing a field."""
    amount = spec_of(call.name).refund_amount
    if amount is None:
        return None
    try:
        return amount(order_fact(order), call_arguments(call), {})
    except (KeyError, TypeError, ValueError):
        return None


def amount_from_read(call: Any, result: str) -> Optional[Decimal]:
    """``refund_amount`` of a read's result text; None if it is not an order document."""
    try:
        order = json.loads(result)
    except ValueError:
        return None
    return refund_amount(call, order) if isinstance(order, dict) else None


def outcome_text(ok: bool, result: str, replayed: bool = False, notified: bool = False) -> str:
    """``applied`` (with how), or ``refused: <the system's reason>``. Never the result
    document itself: an order holds the customer id and the shipping address."""
    if not ok:
        return "refused: " + result.removeprefix("Error: ")[:NOTE_CHARS]
    how = [*(["already recorded, not applied again"] if replayed else []), *(["customer notified"] if notified else [])]
    return "applied" + (f" ({', '.join(how)})" if how else "")


class RefundSummary(BaseModel):
    """Answer of ``RefundWorkflow``'s ``summary`` query. ``amount``: the money the write sends
    back to the customer (``refund_amount``, decimal currency), None before the fresh read or for
    a write that sends none back. ``approval_details``: approval id -> the sentence the approval
    is about (``workflows.refund.standalone.write_detail``: no payment method ids)."""

    amount: Optional[Decimal] = None
    approval_details: dict[str, str] = {}


@dataclass
class RefundView:
    """The refund as operators see it; ``enter`` publishes each step."""

    call: Any
    operation_id: str
    step: str = "starting"
    note: str = ""
    amount: Optional[Decimal] = None
    outcome: Optional[str] = None
    pseudonym: Optional[str] = None
    _published: dict[str, Any] = field(default_factory=dict)
    _status_key: Any = field(default_factory=status_key)
    """Asked when the view is made, at the run's start: a patch asked first after the pseudonym's
    local activity would not be seen at the same point on replay."""

    @property
    def order_id(self) -> str:
        """The order the refund acts on."""
        return self.call.arguments.order_id

    @property
    def status(self) -> str:
        """``running``, ``applied``, ``refused`` or ``escalated``."""
        return FINAL_STATUS.get(self.step, "running")

    def enter(self, step: str, note: str = "", approvals: Sequence[Any] = ()) -> None:
        """Move to ``step`` (``note``: what it does, no personal data) and publish."""
        self.step, self.note = step, note[:NOTE_CHARS]
        self.publish(approvals)

    def publish(self, approvals: Sequence[Any] = ()) -> None:
        """Upsert the changed search attributes and set the current details."""
        wanted: dict[Any, Any] = {STEP: self.step, self._status_key: self.status, ORDER_IDS: [self.order_id]}
        if self.pseudonym:
            wanted[CUSTOMER_ID] = self.pseudonym
        changed = {key: value for key, value in wanted.items() if self._published.get(key.name) != value}
        if changed:
            workflow.upsert_search_attributes([key.value_set(value) for key, value in changed.items()])
            self._published.update({key.name: value for key, value in changed.items()})
        workflow.set_current_details(self.details(approvals))

    def details(self, approvals: Sequence[Any] = ()) -> str:
        """The current details, Markdown."""
        lines = [f"**Refund** on order `{self.order_id}` — status **{self.status}**",
                 f"**Operation:** {describe_call(self.call)} (operation `{self.operation_id}`)",
                 f"**Step:** {self.step}" + (f" — {self.note}" if self.note else "")]
        if self.amount is not None:
            lines.append(f"**Amount:** {self.amount}")
        if self.pseudonym:
            lines.append(f"**Customer:** `{self.pseudonym}`")
        for approval in approvals:
            status = getattr(getattr(approval, "status", ""), "value", getattr(approval, "status", ""))
            if status == "pending":
                lines.append(f"**Approval pending:** `{approval.approval_id}` — amount {approval.amount}, "
                             f"expires {when(approval.expires_at)}")
            else:
                lines.append(f"**Approval {status}** by `{approval.approver or 'nobody'}`"
                             + (f" at {when(approval.decided_at)}" if getattr(approval, "decided_at", None) else ""))
        if self.outcome:
            lines.append(f"**Outcome:** {self.outcome}")
        return "\n\n".join(lines)
