"""The τ-bench retail write tools, and the store's own goodwill credit: pure functions over
the benchmark's data dicts.

Each τ-bench tool reproduces ``tau_bench/envs/retail/tools/*.py`` (sierra-research/tau-bench@59a200c):
the same preconditions in the same order, the same ``"Error: ..."`` strings and effects
(see :mod:`systems.retail.tools`); ``grant_goodwill_credit`` is not the benchmark's.
``@write_tool(locks=..., loads=...)`` names the rows the backend locks (the ones the function
may change) and the ones it only reads.
"""

from __future__ import annotations

import copy
import json
from decimal import ROUND_DOWN, Decimal, InvalidOperation

from systems.retail.rows import Rows
from systems.retail.tools.orders import (
    add_balance,
    address,
    delivered_order,
    item_change_difference,
    missing_item,
    pending_order,
)
from systems.retail.tools.registry import Data, write_tool

CANCEL_REASONS = ("no longer needed", "ordered by mistake")
"""The only reasons ``cancel_pending_order`` accepts (the benchmark's tool checks them itself)."""


@write_tool(locks=Rows.ORDER_AND_OWNER)
def cancel_pending_order(data: Data, order_id: str, reason: str) -> str:
    """Cancel a ``pending`` order (policy: cancel only pending, reason must be one of
    :data:`CANCEL_REASONS`).

    Effects: status ``"cancelled"``, ``cancel_reason`` added, one refund entry per
    payment_history entry appended (same amount and method, in order); gift-card
    refunds are credited to the balance immediately (rounded to 2 decimals).
    Returns ``json.dumps`` of the order.
    """
    order, error = pending_order(data, order_id, "cancelled")
    if error:
        return error
    if reason not in CANCEL_REASONS:
        return "Error: invalid reason"
    methods = data["users"][order["user_id"]]["payment_methods"]
    refunds = [
        {
            "transaction_type": "refund",
            "amount": payment["amount"],
            "payment_method_id": payment["payment_method_id"],
        }
        for payment in order["payment_history"]
    ]
    # Gift cards are refunded at once; other methods "in 5-7 business days", i.e. never here.
    credits = [
        (methods[r["payment_method_id"]], r["amount"]) for r in refunds if "gift_card" in r["payment_method_id"]
    ]
    for payment_method, amount in credits:
        add_balance(payment_method, amount)
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(refunds)
    return json.dumps(order)


@write_tool(locks=Rows.ORDER_AND_OWNER, reversible=True)
def modify_pending_order_address(
    data: Data, order_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
) -> str:
    """Replace a ``pending`` order's shipping address; returns ``json.dumps`` of the order."""
    order, error = pending_order(data, order_id, "modified")
    if error:
        return error
    order["address"] = address(address1, address2, city, state, country, zip)
    return json.dumps(order)


@write_tool(locks=Rows.ORDER_AND_OWNER, loads=Rows.ORDER_PRODUCTS)
def modify_pending_order_items(
    data: Data, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> str:
    """Swap items of a ``pending`` order for available variants of the same products.

    The price difference (new - old, summed, NOT rounded - as the benchmark) is charged
    (``"payment"`` if > 0, else ``"refund"`` of its absolute value) to
    ``payment_method_id``; a gift card needs balance >= the difference and its balance
    is debited and rounded to 2 decimals. Status becomes ``"pending (item modified)"``,
    so the order can no longer be modified or cancelled. Returns ``json.dumps`` of the order.
    """
    order, error = pending_order(data, order_id, "modified")
    if error:
        return error
    diff_price, error = item_change_difference(data, order, item_ids, new_item_ids)
    if error:
        return error
    payment_method = data["users"][order["user_id"]]["payment_methods"].get(payment_method_id)
    if payment_method is None:
        return "Error: payment method not found"
    if payment_method["source"] == "gift_card" and payment_method["balance"] < diff_price:
        return "Error: insufficient gift card balance to pay for the new item"

    order["payment_history"].append(
        {
            "transaction_type": "payment" if diff_price > 0 else "refund",
            "amount": abs(diff_price),
            "payment_method_id": payment_method_id,
        }
    )
    if payment_method["source"] == "gift_card":
        add_balance(payment_method, -diff_price)
    variants_of = data["products"]
    for item_id, new_item_id in zip(item_ids, new_item_ids):
        # Re-looked-up after each swap, as the benchmark does, so duplicates (and a new
        # id equal to a later old id) resolve to the same line items it picks.
        item = [item for item in order["items"] if item["item_id"] == item_id][0]
        variant = variants_of[item["product_id"]]["variants"][new_item_id]
        item["item_id"] = new_item_id
        item["price"] = variant["price"]
        item["options"] = copy.deepcopy(variant["options"])
    order["status"] = "pending (item modified)"
    return json.dumps(order)


@write_tool(locks=Rows.ORDER_AND_OWNER)
def modify_pending_order_payment(data: Data, order_id: str, payment_method_id: str) -> str:
    """Move a ``pending`` order's single payment to another of the user's methods.

    Appends a ``"payment"`` of the full amount on the new method, then a ``"refund"``
    to the original one. A gift card paying needs balance >= amount and is debited;
    a gift card refunded is credited; balances rounded to 2 decimals. Returns
    ``json.dumps`` of the order.
    """
    order, error = pending_order(data, order_id, "modified")
    if error:
        return error
    methods = data["users"][order["user_id"]]["payment_methods"]
    if payment_method_id not in methods:
        return "Error: payment method not found"
    history = order["payment_history"]
    if len(history) > 1 or history[0]["transaction_type"] != "payment":
        return "Error: there should be exactly one payment for a pending order"
    old_method_id = history[0]["payment_method_id"]
    if old_method_id == payment_method_id:
        return "Error: the new payment method should be different from the current one"
    amount = history[0]["amount"]
    payment_method = methods[payment_method_id]
    if payment_method["source"] == "gift_card" and payment_method["balance"] < amount:
        return "Error: insufficient gift card balance to pay for the order"
    old_method = methods[old_method_id] if "gift_card" in old_method_id else None

    history.extend(
        [
            {"transaction_type": "payment", "amount": amount, "payment_method_id": payment_method_id},
            {"transaction_type": "refund", "amount": amount, "payment_method_id": old_method_id},
        ]
    )
    if payment_method["source"] == "gift_card":
        add_balance(payment_method, -amount)
    if old_method is not None:
        add_balance(old_method, amount)
    return json.dumps(order)


@write_tool(locks=Rows.USER, reversible=True)
def modify_user_address(
    data: Data, user_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
) -> str:
    """Replace a user's default address; returns ``json.dumps`` of the user."""
    if user_id not in data["users"]:
        return "Error: user not found"
    user = data["users"][user_id]
    user["address"] = address(address1, address2, city, state, country, zip)
    return json.dumps(user)


@write_tool(locks=Rows.ORDER_AND_OWNER)
def return_delivered_order_items(
    data: Data, order_id: str, item_ids: list[str], payment_method_id: str
) -> str:
    """Request a return of items of a ``delivered`` order (policy: refund to the
    original payment method or an existing gift card).

    Moves no money now: status ``"return requested"``, ``return_items`` (sorted ids)
    and ``return_payment_method_id`` are added. Returns ``json.dumps`` of the order.
    """
    order, error = delivered_order(data, order_id, "returned")
    if error:
        return error
    if payment_method_id not in data["users"][order["user_id"]]["payment_methods"]:
        return "Error: payment method not found"
    if (
        "gift_card" not in payment_method_id
        and payment_method_id != order["payment_history"][0]["payment_method_id"]
    ):
        return "Error: payment method should be either the original payment method or a gift card"
    if missing_item(order, item_ids) is not None:
        return "Error: some item not found"
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
    return json.dumps(order)


@write_tool(locks=Rows.ORDER_AND_OWNER, loads=Rows.ORDER_PRODUCTS)
def exchange_delivered_order_items(
    data: Data, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> str:
    """Request an exchange of items of a ``delivered`` order for available variants
    of the same products.

    Moves no money now: status ``"exchange requested"``, ``exchange_items`` and
    ``exchange_new_items`` (each sorted), ``exchange_payment_method_id`` and
    ``exchange_price_difference`` (rounded to 2 decimals) are added; a gift card
    needs balance >= the difference. Returns ``json.dumps`` of the order.
    """
    order, error = delivered_order(data, order_id, "exchanged")
    if error:
        return error
    diff_price, error = item_change_difference(data, order, item_ids, new_item_ids)
    if error:
        return error
    diff_price = round(diff_price, 2)
    payment_method = data["users"][order["user_id"]]["payment_methods"].get(payment_method_id)
    if payment_method is None:
        return "Error: payment method not found"
    if payment_method["source"] == "gift_card" and payment_method["balance"] < diff_price:
        return "Error: insufficient gift card balance to pay for the price difference"
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = payment_method_id
    order["exchange_price_difference"] = diff_price
    return json.dumps(order)


GOODWILL_SHARE = Decimal("0.10")
"""A goodwill credit is at most this share of the order's item total."""
GOODWILL_ENTRY = "goodwill_credit"
"""The ``transaction_type`` of the ``payment_history`` entry recording a goodwill credit."""


@write_tool(locks=Rows.ORDER_AND_OWNER)
def grant_goodwill_credit(data: Data, order_id: str, amount: str, reason: str, payment_method_id: str) -> str:
    """Credit ``amount`` (decimal currency, whole cents; text or a number) to a gift card of the
    owner of a ``delivered`` order, for ``reason`` (a problem with the order).

    At most :data:`GOODWILL_SHARE` of the order's item total (rounded down to cents) and at most
    one credit per order: the order row is locked, so two credits of one order cannot both pass.
    Effects: the gift card's balance grows by the amount (rounded to 2 decimals); a
    ``goodwill_credit`` entry (amount, gift card) is appended to the order's payment_history and
    ``goodwill_credit_reason`` is set. Returns ``json.dumps`` of the order.
    """
    order, error = delivered_order(data, order_id, "given a goodwill credit")
    if error:
        return error
    payment_method = data["users"][order["user_id"]]["payment_methods"].get(payment_method_id)
    if payment_method is None:
        return "Error: payment method not found"
    if payment_method["source"] != "gift_card":
        return "Error: a goodwill credit goes to a gift card"
    if not reason.strip():
        return "Error: a goodwill credit needs its reason"
    if any(entry["transaction_type"] == GOODWILL_ENTRY for entry in order["payment_history"]):
        return "Error: the order already received a goodwill credit"
    try:
        value = Decimal(str(amount).strip())
    except InvalidOperation:
        return "Error: invalid amount"
    if not value.is_finite() or value <= 0 or value != value.quantize(Decimal("0.01")):
        return "Error: the amount must be positive, in whole cents"
    total = sum((Decimal(str(item["price"])) for item in order["items"]), Decimal(0))
    cap = (total * GOODWILL_SHARE).quantize(Decimal("0.01"), rounding=ROUND_DOWN)
    if value > cap:
        return f"Error: a goodwill credit is at most {cap} for this order (10% of its total)"
    add_balance(payment_method, float(value))
    order["payment_history"].append(
        {"transaction_type": GOODWILL_ENTRY, "amount": float(value), "payment_method_id": payment_method_id}
    )
    order["goodwill_credit_reason"] = reason
    return json.dumps(order)


@write_tool
def transfer_to_human_agents(data: Data, summary: str) -> str:
    """Hand the conversation to a human; changes no data (statekeeper opens a ticket)."""
    return "Transfer successful"

