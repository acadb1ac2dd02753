"""Order tools: read an order; cancel or modify a pending one (address, payment, items)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from workflows.domain.catalogue import amounts, details, folds, state_reads
from workflows.domain.catalogue.checks import cancel_reason, item_change, payment_change
from workflows.domain.catalogue.customers import ADDRESS_FIELDS, AddressArgs
from workflows.domain.catalogue.spec import (
    Execution,
    Scope,
    StatusRequirement,
    ToolArgs,
    ToolClass,
    ToolSpec,
)
from workflows.domain.policy.clauses import Rule

ORDER_ID = Field(min_length=1, max_length=100)
"""An order id as the model sends it; its shape is the system of record's to judge."""
PAYMENT_METHOD_ID = Field(min_length=1, max_length=100)
ItemId = Annotated[str, Field(min_length=1, max_length=100)]
"""One item id: bounded, so a list of them stays small in the state and the prompt."""
ITEM_IDS = Field(min_length=1, max_length=50)
PENDING = "pending"


class GetOrderDetailsArgs(ToolArgs):
    order_id: str = ORDER_ID


class CancelPendingOrderArgs(ToolArgs):
    order_id: str = ORDER_ID
    reason: str = Field(max_length=200)  # the allowed reasons are a policy rule, checked with its reason


class ModifyPendingOrderAddressArgs(AddressArgs):
    order_id: str = ORDER_ID


class ModifyPendingOrderPaymentArgs(ToolArgs):
    order_id: str = ORDER_ID
    payment_method_id: str = PAYMENT_METHOD_ID


class ItemChangeArgs(ToolArgs):
    """Items to change and the new item (variant) for each, position by position."""

    order_id: str = ORDER_ID
    item_ids: list[ItemId] = ITEM_IDS
    new_item_ids: list[ItemId] = ITEM_IDS
    payment_method_id: str = PAYMENT_METHOD_ID


class ModifyPendingOrderItemsArgs(ItemChangeArgs):
    pass


def _pending(rule: Rule, verb: str, **extra) -> StatusRequirement:
    return StatusRequirement(status=PENDING, rule=rule, verb=verb, **extra)


POSITION = 20
"""Where these tools come in the catalogue (``workflows.domain.catalogue``), which is the order
the model reads them in."""

SPECS = (
    ToolSpec(
        name="get_order_details", args=GetOrderDetailsArgs, tool_class=ToolClass.READ,
        description="Read an order's status, items, payment history and fulfilments.",
        scope=Scope.ORDER_LOOKUP, fold=folds.order, reads="order_id", state_driven=state_reads.named_orders,
    ),
    ToolSpec(
        name="cancel_pending_order", args=CancelPendingOrderArgs, tool_class=ToolClass.IRREVERSIBLE_WRITE,
        description="Cancel a pending order (needs confirmation).",
        scope=Scope.ORDER, execution=Execution.REFUND_WORKFLOW,
        status=_pending(Rule.CANCEL_PENDING_ONLY, "cancelled", single_payment=True),
        check=cancel_reason, detail=details.cancel, fold=folds.order, approval_amount=amounts.item_total,
        refunds=amounts.always, refund_amount=amounts.item_total, payment_movements=amounts.refund_per_payment,
        operation="cancel", noun="cancellation",
    ),
    ToolSpec(
        name="modify_pending_order_address", args=ModifyPendingOrderAddressArgs,
        tool_class=ToolClass.REVERSIBLE_WRITE,
        description="Change a pending order's shipping address (needs confirmation).",
        scope=Scope.ORDER, status=_pending(Rule.MODIFY_PENDING_ONLY, "modified"),
        detail=details.order_address, fold=folds.order,
        compensation="modify_pending_order_address", compensation_from="address",
        personal_data=ADDRESS_FIELDS, noun="address change",
    ),
    ToolSpec(
        name="modify_pending_order_payment", args=ModifyPendingOrderPaymentArgs,
        tool_class=ToolClass.IRREVERSIBLE_WRITE,
        description="Pay a pending order with another payment method (needs confirmation).",
        scope=Scope.ORDER, execution=Execution.REFUND_WORKFLOW,
        status=_pending(Rule.MODIFY_PENDING_ONLY, "modified"),
        check=payment_change, detail=details.payment, fold=folds.order, approval_amount=amounts.order_total,
        refunds=amounts.always, payment_movements=amounts.payment_and_refund,
        operation="modify_payment", noun="payment change", personal_data=frozenset({"payment_method_id"}),
    ),
    ToolSpec(
        name="modify_pending_order_items", args=ModifyPendingOrderItemsArgs, tool_class=ToolClass.IRREVERSIBLE_WRITE,
        description="Swap items of a pending order for other variants of the same product, once per order "
        "(needs confirmation).",
        scope=Scope.ORDER, execution=Execution.REFUND_WORKFLOW,
        status=_pending(Rule.MODIFY_PENDING_ONLY, "modified", once_status="pending (item modified)"),
        check=item_change("modify_pending_order_items"), detail=details.item_change("Modify"), fold=folds.order,
        approval_amount=amounts.price_difference, refunds=amounts.cheaper_items,
        refund_destination="payment_method_id", payment_movements=amounts.one_entry,
        operation="modify_items", noun="item change", personal_data=frozenset({"payment_method_id"}),
    ),
)
