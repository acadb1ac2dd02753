"""Read-before-write: a confirmed write runs only on the order (and payment method) the user
confirmed. Right before the write, after the ledger (an operation already applied returns its
result whatever the order looks like now), the order and the payment method the write uses
are read again; if either changed since the user said yes, nothing is written and the model
and the user are told.

What counts as the order's state: its status, its items (id and price) and its payment
history; of a payment method, its source and (gift card) balance. Pure: imported inside the
workflow sandbox.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Optional

from workflows.domain.catalogue.folds import order_fact
from workflows.domain.records import OrderFact, PaymentMethod

CHANGED_REASON = ("the order or its payment method changed after you confirmed (changed-since-confirmed); "
                  "nothing was done")
CHANGED_RESULT = f"Error: {CHANGED_REASON}"


def _order_part(order: OrderFact) -> list[Any]:
    return [order.status, [[i.item_id, f"{i.price:.2f}"] for i in order.items],
            [[p.transaction_type, f"{p.amount:.2f}", p.payment_method_id] for p in order.payment_history]]


def _method_part(method: Optional[PaymentMethod]) -> list[Any]:
    if method is None:
        return []
    return [method.source, None if method.balance is None else f"{method.balance:.2f}"]


def fingerprint(order: OrderFact, method: Optional[PaymentMethod]) -> str:
    """SHA-256 hex of the order's and the payment method's state (module docstring)."""
    canonical = json.dumps([_order_part(order), _method_part(method)], separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def payment_method_of(call: Any) -> Optional[str]:
    """The payment method a write uses, if it names one."""
    return getattr(call.arguments, "payment_method_id", None)


def confirmed(state: Any, call: Any) -> tuple[Optional[str], Optional[str]]:
    """(fingerprint, payment method id) of what the user confirmed: the conversation's copy of
    the order and of the customer's payment method the write uses (the id is None when the
    write names none or the state does not hold it: then only the order counts); (None, None)
    when the state holds no such order."""
    order = state.orders.get(getattr(call.arguments, "order_id", None) or "")
    if order is None:
        return None, None
    method_id = payment_method_of(call)
    method = state.customer.payment_methods.get(method_id) if state.customer and method_id else None
    return fingerprint(order, method), method.id if method is not None else None


def fresh(order_doc: dict[str, Any], user_doc: Optional[dict[str, Any]], method_id: Optional[str]) -> str:
    """The fingerprint of the same, from documents just read from the system of record."""
    method = None
    if user_doc is not None and method_id:
        raw = user_doc.get("payment_methods", {}).get(method_id)
        if raw is not None:
            method = PaymentMethod(id=method_id, source=raw.get("source", ""), balance=raw.get("balance"))
    return fingerprint(order_fact(order_doc), method)


def changed(state: Any, call: Any, order_doc: dict[str, Any]) -> bool:
    """True when ``order_doc`` (just read) is an order of the state whose status, items or
    payment history differ from the conversation's copy (what the user confirmed). False for
    another subject (a user's document) or an order the state does not hold."""
    order = state.orders.get(order_doc.get("order_id") or "") if "payment_history" in order_doc else None
    if order is None:
        return False
    try:
        return fingerprint(order_fact(order_doc), None) != fingerprint(order, None)
    except (KeyError, TypeError, ValueError):
        return False  # not an order document after all: the write's own checks decide
