"""How each section of the retail data maps onto its table.

One place knows, per :class:`~systems.retail.rows.Section`, the table, its key column,
the column naming the customer who owns a row (for customer-scoped reads) and the
lookup columns derived from a document (rewritten whenever the document is).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import sqlalchemy as sa

from systems.retail.rows import Section
from systems.retail.schema import Order, Product, User


def user_keys(doc: dict[str, Any]) -> dict[str, Any]:
    """The lookup columns of a user document: ``email_lc``, ``first_lc``, ``last_lc``
    (Python's ``str.lower``, not SQL's, so lookups agree with the benchmark on any
    Unicode) and ``zip``."""
    name = doc["name"]
    return {
        "email_lc": str(doc["email"]).lower(),
        "first_lc": str(name["first_name"]).lower(),
        "last_lc": str(name["last_name"]).lower(),
        "zip": str(doc["address"]["zip"]),
    }


def order_keys(doc: dict[str, Any]) -> dict[str, Any]:
    """The lookup columns of an order document: ``user_id`` and ``status``."""
    return {"user_id": doc["user_id"], "status": doc["status"]}


@dataclass(frozen=True)
class SectionTable:
    """``table`` holds the documents of one section; ``key`` is the name of its key
    column, ``owner`` the column holding the owning customer's ``user_id`` (None: rows
    are not owned by a customer), ``derived`` computes the lookup columns from a doc."""

    section: Section
    table: sa.Table
    key: str
    owner: str | None
    derived: Callable[[dict[str, Any]], dict[str, Any]]

    def row(self, store: str, key: str, position: int, doc: dict[str, Any]) -> dict[str, Any]:
        """The full row (all columns) for ``doc`` at index ``position`` of its JSON file."""
        return {"store": store, self.key: key, "position": position, **self.derived(doc), "doc": doc}


TABLES: dict[Section, SectionTable] = {
    Section.ORDERS: SectionTable(Section.ORDERS, Order.__table__, "order_id", "user_id", order_keys),
    Section.PRODUCTS: SectionTable(Section.PRODUCTS, Product.__table__, "product_id", None, lambda doc: {}),
    Section.USERS: SectionTable(Section.USERS, User.__table__, "user_id", None, user_keys),
}
"""Every section's table, in the order of the benchmark's data dict (orders, products, users)."""
