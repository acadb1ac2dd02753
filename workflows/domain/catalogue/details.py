"""The exact detail of each write, as the user confirms it (the ``detail`` of a spec).

Amounts are computed from the state's facts (decimal currency, 2 places), never taken
from model text (policy clause explicit-confirmation).
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from workflows.domain.catalogue.checks import item_change_difference

if TYPE_CHECKING:
    from workflows.domain.state import ConversationState


def money(value: Decimal) -> str:
    """Currency with 2 places (``Decimal("826.7")`` → ``"826.70"``)."""
    return f"{value:.2f}"


def method(state: ConversationState, method_id: str) -> str:
    """A payment method as the user knows it ("credit_card_1 (visa ending 1234)")."""
    if state.customer and method_id in state.customer.payment_methods:
        display = state.customer.payment_methods[method_id].display
        return f"{method_id} ({display})" if display else method_id
    return method_id


def address(args: dict[str, Any]) -> str:
    """The address fields of ``args`` in postal order, empty ones left out."""
    return ", ".join(args[k] for k in ("address1", "address2", "city", "state", "zip", "country") if args[k])


def cancel(state: ConversationState, args: dict[str, Any]) -> str:
    """Cancel order X (reason), and what is refunded."""
    order = state.orders.get(args["order_id"])
    refund = f" The full amount of {money(order.total)} is refunded to the original payment method." if order else ""
    return f"Cancel order {args['order_id']} (reason: {args['reason']}).{refund}"


def order_address(state: ConversationState, args: dict[str, Any]) -> str:
    """Change the shipping address of an order."""
    return f"Change the shipping address of order {args['order_id']} to: {address(args)}."


def user_address(state: ConversationState, args: dict[str, Any]) -> str:
    """Change the customer's default address."""
    return f"Change your default address to: {address(args)}."


def payment(state: ConversationState, args: dict[str, Any]) -> str:
    """Pay an order with another method."""
    return f"Pay order {args['order_id']} with {method(state, args['payment_method_id'])} instead of the current method."


def return_items(state: ConversationState, args: dict[str, Any]) -> str:
    """Return items X, Y and refund their total to a method."""
    order = state.orders.get(args["order_id"])
    by_id = {i.item_id: i for i in order.items} if order else {}
    parts, total = [], Decimal("0.00")
    for item_id in args["item_ids"]:
        item = by_id.get(item_id)
        if item:
            parts.append(f"{item.name} {item_id} ({money(item.price)})")
            total += item.price
        else:
            parts.append(item_id)
    return (f"Return from order {args['order_id']}: {', '.join(parts)}. Refund {money(total)} to "
            f"{method(state, args['payment_method_id'])}.")


def item_change(verb: str):
    """Modify/Exchange items old -> new with options and prices, and the price difference."""

    def detail(state: ConversationState, args: dict[str, Any]) -> str:
        order = state.orders.get(args["order_id"])
        by_id = {i.item_id: i for i in order.items} if order else {}
        parts = []
        for old_id, new_id in zip(args["item_ids"], args["new_item_ids"]):
            old = by_id.get(old_id)
            product = state.products.get(old.product_id) if old else None
            variant = product.variants.get(new_id) if product else None
            if old and variant:
                options = ", ".join(f"{k} {v}" for k, v in variant.options.items())
                parts.append(f"{old.name} {old_id} ({money(old.price)}) -> {new_id} [{options}] "
                             f"({money(variant.price)})")
            else:
                parts.append(f"{old_id} -> {new_id}")
        difference = item_change_difference(state, order, args["item_ids"], args["new_item_ids"]) if order else Decimal(0)
        direction = "to pay" if difference > 0 else "to be refunded"
        return (f"{verb} in order {args['order_id']}: {'; '.join(parts)}. Price difference {direction}: "
                f"{money(abs(difference))} via {method(state, args['payment_method_id'])}. "
                "This can be done only once for this order: are these all the items?")

    return detail
