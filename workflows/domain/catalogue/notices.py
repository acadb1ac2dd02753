"""The emails refund-type writes send their customer once applied (the ``notify`` of a spec).

A body is built from the order document the write returned (the system of record's JSON,
parsed); it names the order and the items concerned, nothing else of the customer.
"""

from __future__ import annotations

from typing import Any

from workflows.domain.catalogue.spec import Notice


def _ship_back(kind: str, follow: str = ""):
    def body(order_id: str, order: dict[str, Any]) -> str:
        items = ", ".join(order.get(f"{kind}_items", []))
        return (f"We received your {kind} request for order {order_id} (items {items}). "
                f"Ship the items back using the label attached{follow}.")

    return body


RETURN = Notice("return", _ship_back("return"))
"""A return: ship the returned items back (``return_items`` of the order)."""
EXCHANGE = Notice("exchange", _ship_back("exchange", "; the new items follow"))
"""An exchange: ship the old items back; the new ones follow (``exchange_items``)."""
