"""Checks and arithmetic the retail write tools share (pure, over the data dicts).

Errors are returned, never raised: ``(value, None)`` or ``(None/0, "Error: ...")`` with
the benchmark's exact strings, so each tool can stop at its first failed check.
"""

from __future__ import annotations

from systems.retail.tools.registry import Data


def address(address1: str, address2: str, city: str, state: str, country: str, zip: str) -> dict[str, str]:
    """An address dict with the benchmark's key order (it shows in the json.dumps results)."""
    return {
        "address1": address1,
        "address2": address2,
        "city": city,
        "state": state,
        "country": country,
        "zip": zip,
    }


def pending_order(data: Data, order_id: str, verb: str) -> tuple[dict | None, str | None]:
    """``(order, None)`` if ``order_id`` is a ``pending`` order, else ``(None, "Error: ...")``;
    ``verb`` completes "non-pending order cannot be ..."."""
    if order_id not in data["orders"]:
        return None, "Error: order not found"
    order = data["orders"][order_id]
    if order["status"] != "pending":
        return None, f"Error: non-pending order cannot be {verb}"
    return order, None


def delivered_order(data: Data, order_id: str, verb: str) -> tuple[dict | None, str | None]:
    """``(order, None)`` if ``order_id`` is a ``delivered`` order, else ``(None, "Error: ...")``."""
    if order_id not in data["orders"]:
        return None, "Error: order not found"
    order = data["orders"][order_id]
    if order["status"] != "delivered":
        return None, f"Error: non-delivered order cannot be {verb}"
    return order, None


def missing_item(order: dict, item_ids: list[str]) -> str | None:
    """The first id of ``item_ids`` the order holds fewer of than listed, else None
    (duplicates are allowed, but no more of an id than the order holds)."""
    all_item_ids = [item["item_id"] for item in order["items"]]
    for item_id in item_ids:
        if item_ids.count(item_id) > all_item_ids.count(item_id):
            return item_id
    return None


def price_difference(
    data: Data, order: dict, item_ids: list[str], new_item_ids: list[str]
) -> tuple[float, str | None]:
    """Sum of (new price - old price), unrounded; error if a new item is not a
    currently available variant of the *same* product as the item it replaces."""
    products = data["products"]
    diff_price = 0
    for item_id, new_item_id in zip(item_ids, new_item_ids):
        item = [item for item in order["items"] if item["item_id"] == item_id][0]
        variants = products[item["product_id"]]["variants"]
        if not (new_item_id in variants and variants[new_item_id]["available"]):
            return 0, f"Error: new item {new_item_id} not found or available"
        diff_price += variants[new_item_id]["price"] - item["price"]
    return diff_price, None


def item_change_difference(
    data: Data, order: dict, item_ids: list[str], new_item_ids: list[str]
) -> tuple[float, str | None]:
    """The checks modify-items and exchange share, in the benchmark's order: items in the
    order, equal list lengths, then the (unrounded) price difference of the new items."""
    missing = missing_item(order, item_ids)
    if missing is not None:
        return 0.0, f"Error: {missing} not found"
    if len(item_ids) != len(new_item_ids):
        return 0.0, "Error: the number of items to be exchanged should match"
    return price_difference(data, order, item_ids, new_item_ids)


def add_balance(payment_method: dict, amount: float) -> None:
    """Add ``amount`` (negative: debit) to a gift card's balance, rounded to 2 decimals."""
    payment_method["balance"] += amount
    payment_method["balance"] = round(payment_method["balance"], 2)
