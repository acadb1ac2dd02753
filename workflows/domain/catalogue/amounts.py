"""The money each refund-type write moves, in ``Decimal`` currency rounded to cents,
computed from the typed ``OrderFact`` as just read from the system of record: the
``approval_amount`` and ``refund_amount`` of a spec (``workflows.domain.policy.approvals``
compares the first with the approval policy; the refund's Web UI view shows the second),
whether it sends money back (``refunds``), and the movements the payments service makes
(``payment_movements``, from the order the write returned).

Prices in the records are already cent ``Decimal`` (``workflows.domain.money``); prices read
from the system of record's JSON (floats) go through ``money``, so 500.01 stays 500.01.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from typing import Any, Callable, Mapping

from workflows.domain.money import CENT, money  # noqa: F401  (re-exported: callers import money from here)
from workflows.domain.catalogue.spec import Movements
from workflows.domain.records import OrderFact


class MissingPrice(LookupError):
    """An item change names a new item whose price is not known. ``known`` is the
    amount of the items whose prices are known; ``item_id`` the first unknown one."""

    def __init__(self, item_id: str, known: Decimal) -> None:
        super().__init__(item_id)
        self.item_id = item_id
        self.known = known


def item_total(order: OrderFact, args: dict[str, Any], prices: Mapping[str, Decimal]) -> Decimal:
    """Cancel: the order's item total (τ-bench policy, cancel pending order: "the total will
    be refunded via the original payment method")."""
    return money(sum((money(item.price) for item in order.items), Decimal(0)))


def order_total(order: OrderFact, args: dict[str, Any], prices: Mapping[str, Decimal]) -> Decimal:
    """Modify payment: the order total, charged to the new method while the original
    payment is refunded (τ-bench policy, modify payment: "the original payment method
    will be refunded"; a gift card "must have enough balance to cover the total amount")."""
    return item_total(order, args, prices)


def returned_items(order: OrderFact, args: dict[str, Any], prices: Mapping[str, Decimal]) -> Decimal:
    """Return: the prices of the returned items, each occurrence counted (τ-bench policy,
    return delivered order: the refund of the returned items goes "to the original payment
    method, or an existing gift card"). Ids not in the order count 0: the policy and the
    system of record refuse such a return before any money moves."""
    prices_in_order: dict[str, list[Decimal]] = {}
    for item in order.items:
        prices_in_order.setdefault(item.item_id, []).append(money(item.price))
    total = Decimal(0)
    for item_id, count in Counter(args["item_ids"]).items():
        total += sum(prices_in_order.get(item_id, [])[:count], Decimal(0))
    return money(total)


def price_difference(order: OrderFact, args: dict[str, Any], prices: Mapping[str, Decimal]) -> Decimal:
    """Exchange and modify items: the absolute value of the price difference (new minus
    old, summed over the changed items) charged to or refunded to ``payment_method_id``
    (τ-bench policy, exchange delivered order / modify items: "a payment method to pay or
    receive refund of the price difference"). ``prices`` maps new item ids to their price;
    raises ``MissingPrice`` when one is missing."""
    by_id = {item.item_id: item for item in order.items}
    difference = Decimal(0)
    missing = None
    for old_id, new_id in zip(args["item_ids"], args["new_item_ids"]):
        old = by_id.get(old_id)
        if old is None:
            continue  # refused by the policy and the system of record before money moves
        if new_id not in prices:
            missing = missing or new_id
            continue
        difference += money(prices[new_id]) - money(old.price)
    if missing is not None:
        raise MissingPrice(missing, money(abs(difference)))
    return money(abs(difference))


def always(order: OrderFact, args: dict[str, Any], prices: Mapping[str, Decimal]) -> bool:
    """``refunds`` of a cancel, a payment change (the original payment is refunded) and a
    return: they always send money back to the customer."""
    return True


def cheaper_items(order: OrderFact, args: dict[str, Any], prices: Mapping[str, Decimal]) -> bool:
    """``refunds`` of an item change: True when the new items are cheaper than the old (the
    difference is refunded). An unknown new price counts as 0, so it counts as cheaper
    (fail closed: the approval rules that concern refunds apply)."""
    by_id = {item.item_id: item for item in order.items}
    difference = sum((prices.get(new, Decimal(0)) - money(by_id[old].price)
                      for old, new in zip(args["item_ids"], args["new_item_ids"]) if old in by_id), Decimal(0))
    return difference < 0


MOVEMENT_FIELDS = ("transaction_type", "amount", "payment_method_id")


def appended(count: Callable[[list[dict[str, Any]]], int]) -> Movements:
    """``payment_movements`` of a write that appends ``count(history)`` entries to the order's
    ``payment_history`` (the history as it returned the order), each moved as it is."""

    def movements(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{field: entry[field] for field in MOVEMENT_FIELDS} for entry in history[len(history) - count(history):]]

    return movements


refund_per_payment = appended(lambda history: len(history) // 2)
"""Cancel: one refund per earlier entry (``payment_history`` doubles)."""
one_entry = appended(lambda history: 1)
"""Modify items: the price difference, paid or refunded."""
payment_and_refund = appended(lambda history: 2)
"""Modify payment: the new payment, then the old one's refund."""
