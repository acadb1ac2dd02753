"""Goodwill credits: a gift-card credit to the customer for a problem with a delivered order
(a late delivery, a damaged or wrong item), within the policy's cap (clause goodwill-credit).

The credit is a refund-type write: confirmed by the user, approved by a supervisor above the
approval threshold, run by its own ``RefundWorkflow`` (also standalone, operation
``goodwill_credit`` of ``POST /refunds``). The system of record credits the gift card and
records the credit on the order (a ``goodwill_credit`` entry of its ``payment_history``), once
per order, in the transaction of the write.
"""

from __future__ import annotations

from decimal import ROUND_DOWN, Decimal
from typing import TYPE_CHECKING, Any, Mapping, Optional

from pydantic import Field

from workflows.domain.catalogue import amounts, details, folds
from workflows.domain.catalogue.orders import ORDER_ID, PAYMENT_METHOD_ID
from workflows.domain.catalogue.spec import (
    Execution,
    Scope,
    StatusRequirement,
    ToolArgs,
    ToolClass,
    ToolSpec,
)
from workflows.domain.money import CENT, money
from workflows.domain.policy.clauses import Rule, require
from workflows.domain.records import OrderFact

if TYPE_CHECKING:
    from workflows.domain.state import ConversationState

NAME = "grant_goodwill_credit"
SHARE = Decimal("0.10")
"""The largest credit, as a share of the order's total (clause goodwill-credit)."""
REASONS = ("late delivery", "damaged item", "wrong item")
"""The problems a goodwill credit is given for (clause goodwill-credit)."""
CREDIT_ENTRY = "goodwill_credit"
"""The ``transaction_type`` of the ``payment_history`` entry the system of record appends."""


class GrantGoodwillCreditArgs(ToolArgs):
    """``amount``: decimal currency, whole cents; ``payment_method_id``: the customer's gift card
    that receives it; ``reason``: one of ``REASONS``, checked by the policy with its reason."""

    order_id: str = ORDER_ID
    amount: Decimal = Field(gt=0, max_digits=12, decimal_places=2)
    reason: str = Field(max_length=200)
    payment_method_id: str = PAYMENT_METHOD_ID


def cap(order: OrderFact) -> Decimal:
    """The largest credit for ``order``: ``SHARE`` of its total, rounded down to cents."""
    return (order.total * SHARE).quantize(CENT, rounding=ROUND_DOWN)


def credited(order: OrderFact) -> bool:
    """True when the order already received a goodwill credit (its payment history says so)."""
    return any(entry.transaction_type == CREDIT_ENTRY for entry in order.payment_history)


def check(state: ConversationState, args: dict[str, Any], order: Optional[OrderFact]) -> None:
    """goodwill-credit: a stated reason of ``REASONS``, one of the customer's gift cards, at
    most one credit per order (as the order was read, or made in this conversation), and an
    amount of at most ``cap``. Raises ``PolicyViolation``."""
    assert order is not None and state.customer is not None
    require(args["reason"] in REASONS, Rule.GOODWILL_CREDIT,
            f"a goodwill credit's reason must be one of {list(REASONS)}, not '{args['reason']}'")
    already = credited(order) or any(op.tool == NAME and op.ok for op in state.operations_on(order.order_id))
    require(not already, Rule.GOODWILL_CREDIT,
            f"order {order.order_id} already received a goodwill credit; an order gets at most one")
    method = state.customer.payment_methods[args["payment_method_id"]]
    require(method.source == "gift_card", Rule.GOODWILL_CREDIT,
            f"a goodwill credit goes to one of the customer's gift cards, not {args['payment_method_id']}")
    amount, most = money(args["amount"]), cap(order)
    require(amount <= most, Rule.GOODWILL_CREDIT,
            f"a goodwill credit is at most {SHARE:.0%} of the order's total of {order.total:.2f}: at most "
            f"{most:.2f} for order {order.order_id}, not {amount:.2f}")


def detail(state: ConversationState, args: dict[str, Any]) -> str:
    """Credit X to a gift card for order Y (reason), once per order."""
    return (f"Credit {details.money(money(args['amount']))} to {details.method(state, args['payment_method_id'])} "
            f"as a goodwill gesture for order {args['order_id']} (reason: {args['reason']}). An order can receive "
            "only one goodwill credit.")


def amount(order: OrderFact, args: dict[str, Any], prices: Mapping[str, Decimal]) -> Decimal:
    """The credit itself: the money approved by a supervisor and shown on the refund's view."""
    return money(args["amount"])


def movements(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The credit as the payments service moves it: a refund (money to the customer) of the
    order's last ``payment_history`` entry, the credit the write appended."""
    credit = history[-1]
    return [{"transaction_type": "refund", "amount": credit["amount"],
             "payment_method_id": credit["payment_method_id"]}]


POSITION = 35
"""Where these tools come in the catalogue (``workflows.domain.catalogue``), which is the order
the model reads them in: after the delivered-order tools."""

SPECS = (
    ToolSpec(
        name=NAME, args=GrantGoodwillCreditArgs, tool_class=ToolClass.IRREVERSIBLE_WRITE,
        description="Credit a goodwill amount to one of the customer's gift cards for a problem with a delivered "
        "order (late delivery, damaged item, wrong item): at most 10% of the order's total, once per order "
        "(needs confirmation).",
        scope=Scope.ORDER, execution=Execution.REFUND_WORKFLOW,
        status=StatusRequirement(status="delivered", rule=Rule.GOODWILL_CREDIT, verb="given a goodwill credit"),
        check=check, detail=detail, fold=folds.order, approval_amount=amount, refunds=amounts.always,
        refund_amount=amount, payment_movements=movements, operation="goodwill_credit", noun="goodwill credit",
        personal_data=frozenset({"payment_method_id"}),
    ),
)
