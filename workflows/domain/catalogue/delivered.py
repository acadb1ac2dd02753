"""Delivered-order tools: return items, exchange items for other variants."""

from __future__ import annotations

from workflows.domain.catalogue import amounts, details, folds, notices
from workflows.domain.catalogue.checks import item_change, return_items
from workflows.domain.catalogue.orders import (
    ITEM_IDS,
    ORDER_ID,
    PAYMENT_METHOD_ID,
    ItemChangeArgs,
    ItemId,
)
from workflows.domain.catalogue.spec import (
    Execution,
    Scope,
    StatusRequirement,
    ToolArgs,
    ToolClass,
    ToolSpec,
)
from workflows.domain.policy.clauses import Rule


class ReturnDeliveredOrderItemsArgs(ToolArgs):
    order_id: str = ORDER_ID
    item_ids: list[ItemId] = ITEM_IDS
    payment_method_id: str = PAYMENT_METHOD_ID


class ExchangeDeliveredOrderItemsArgs(ItemChangeArgs):
    pass


def _delivered(rule: Rule, verb: str, **extra) -> StatusRequirement:
    return StatusRequirement(status="delivered", rule=rule, verb=verb, **extra)


POSITION = 30
"""Where these tools come in the catalogue (``workflows.domain.catalogue``), which is the order
the model reads them in."""

SPECS = (
    ToolSpec(
        name="return_delivered_order_items", args=ReturnDeliveredOrderItemsArgs,
        tool_class=ToolClass.IRREVERSIBLE_WRITE,
        description="Return items of a delivered order (needs confirmation).",
        scope=Scope.ORDER, execution=Execution.REFUND_WORKFLOW,
        status=_delivered(Rule.RETURN_DELIVERED_ONLY, "returned"),
        check=return_items, detail=details.return_items, fold=folds.order, notify=notices.RETURN,
        approval_amount=amounts.returned_items, refunds=amounts.always, refund_destination="payment_method_id",
        refund_amount=amounts.returned_items, operation="return", noun="return",
        personal_data=frozenset({"payment_method_id"}),
    ),
    ToolSpec(
        name="exchange_delivered_order_items", args=ExchangeDeliveredOrderItemsArgs,
        tool_class=ToolClass.IRREVERSIBLE_WRITE,
        description="Exchange items of a delivered order for other variants of the same product, once per "
        "order (needs confirmation).",
        scope=Scope.ORDER, execution=Execution.REFUND_WORKFLOW,
        status=_delivered(Rule.EXCHANGE_DELIVERED_ONLY, "exchanged", once_status="exchange requested"),
        check=item_change("exchange_delivered_order_items"), detail=details.item_change("Exchange"),
        fold=folds.order, notify=notices.EXCHANGE, approval_amount=amounts.price_difference,
        refunds=amounts.cheaper_items, refund_destination="payment_method_id", operation="exchange",
        noun="exchange", personal_data=frozenset({"payment_method_id"}),
    ),
)
