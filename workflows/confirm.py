"""Explicit confirmation: the workflow, not the model, shows the exact action detail
and reads the user's yes or no (policy clause explicit-confirmation).

Amounts in the detail are computed from the state's facts (decimal currency, 2
places), never taken from model text.
"""

from __future__ import annotations

import re
from typing import Any

from workflows.actions import call_arguments
from workflows.policy import item_change_difference
from workflows.state import ConversationState

_AFFIRMATIVE = frozenset({
    "yes", "y", "yep", "yeah", "yes please", "yes proceed", "yes please proceed", "yes go ahead",
    "yes do it", "yes i confirm", "i confirm", "confirm", "confirmed", "proceed", "please proceed",
    "go ahead", "sure", "ok", "okay", "correct", "yes that's correct", "that's correct",
    "that's right", "yes that's right",
})
_NEGATIVE = frozenset({
    "no", "n", "nope", "nah", "no thanks", "no thank you", "don't", "do not", "stop", "cancel that",
    "never mind", "wait", "hold on", "not yet", "no don't", "no stop",
})


def _normalise(text: str) -> str:
    text = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    text = re.sub(r"[,;:]", " ", text)
    text = re.sub(r"[.!\s]+$", "", text.strip())
    return re.sub(r"\s+", " ", text)


def is_yes(text: str) -> bool:
    """An explicit yes: the whole message is one of a fixed set of affirmatives ("yes",
    "Yes!!", "go ahead", "I confirm", ...). Anything else, a question, a condition or a
    hedge ("yes?", "yes but only the first item", "ok, never mind"), is not a yes."""
    return _normalise(text) in _AFFIRMATIVE


def is_no(text: str) -> bool:
    """An explicit no to the pending action (the whole message is a refusal)."""
    return _normalise(text) in _NEGATIVE


def _money(value: float) -> str:
    return f"{value:.2f}"


def _method(state: ConversationState, method_id: str) -> str:
    if state.customer and method_id in state.customer.payment_methods:
        display = state.customer.payment_methods[method_id].display
        return f"{method_id} ({display})" if display else method_id
    return method_id


def _items(state: ConversationState, order_id: str, item_ids: list[str]) -> tuple[str, float]:
    order = state.orders.get(order_id)
    by_id = {i.item_id: i for i in order.items} if order else {}
    parts, total = [], 0.0
    for item_id in item_ids:
        item = by_id.get(item_id)
        if item:
            parts.append(f"{item.name} {item_id} ({_money(item.price)})")
            total += item.price
        else:
            parts.append(item_id)
    return ", ".join(parts), round(total, 2)


def _new_items(state: ConversationState, order_id: str, item_ids: list[str], new_ids: list[str]) -> tuple[str, float]:
    order = state.orders.get(order_id)
    by_id = {i.item_id: i for i in order.items} if order else {}
    parts = []
    for old_id, new_id in zip(item_ids, new_ids):
        old = by_id.get(old_id)
        product = state.products.get(old.product_id) if old else None
        variant = product.variants.get(new_id) if product else None
        if old and variant:
            options = ", ".join(f"{k} {v}" for k, v in variant.options.items())
            parts.append(f"{old.name} {old_id} ({_money(old.price)}) -> {new_id} [{options}] ({_money(variant.price)})")
        else:
            parts.append(f"{old_id} -> {new_id}")
    difference = item_change_difference(state, order, item_ids, new_ids) if order else 0.0
    return "; ".join(parts), difference


def describe(state: ConversationState, call: Any) -> str:
    """The exact detail of a write, as shown to the user before they confirm."""
    args = call_arguments(call)
    name = call.name
    if name == "cancel_pending_order":
        order = state.orders.get(args["order_id"])
        refund = f" The full amount of {_money(order.total)} is refunded to the original payment method." if order else ""
        return f"Cancel order {args['order_id']} (reason: {args['reason']}).{refund}"
    if name in ("modify_pending_order_address", "modify_user_address"):
        where = f"order {args['order_id']}" if "order_id" in args else f"the default address of {args['user_id']}"
        address = ", ".join(args[k] for k in ("address1", "address2", "city", "state", "zip", "country") if args[k])
        return f"Change the shipping address of {where} to: {address}."
    if name == "modify_pending_order_payment":
        return f"Pay order {args['order_id']} with {_method(state, args['payment_method_id'])} instead of the current method."
    if name == "return_delivered_order_items":
        items, total = _items(state, args["order_id"], args["item_ids"])
        return (f"Return from order {args['order_id']}: {items}. Refund {_money(total)} to "
                f"{_method(state, args['payment_method_id'])}.")
    if name in ("exchange_delivered_order_items", "modify_pending_order_items"):
        verb = "Exchange" if name.startswith("exchange") else "Modify"
        changes, difference = _new_items(state, args["order_id"], args["item_ids"], args["new_item_ids"])
        direction = "to pay" if difference > 0 else "to be refunded"
        return (f"{verb} in order {args['order_id']}: {changes}. Price difference {direction}: "
                f"{_money(abs(difference))} via {_method(state, args['payment_method_id'])}. "
                "This can be done only once for this order: are these all the items?")
    return f"{name} {args}"


def confirmation_prompt(detail: str) -> str:
    """The message that asks for confirmation of ``detail``."""
    return f"Please confirm: {detail} Reply 'yes' to proceed or 'no' to stop."
