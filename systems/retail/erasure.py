"""Erasure of the side records a caller keeps in the retail system: ledger rows, queued
emails (outbox) and tickets, found by key fragments, by ticket owner or by recipient.

The system does not interpret the keys (their formats are the caller's): it finds rows
whose key contains a fragment, and deletes or anonymises the rows the caller picked. The
customer's profile and orders are the system's own records and are never touched here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Iterable, NamedTuple, Optional

import sqlalchemy as sa

from systems.retail.engine import Database
from systems.retail.schema import LedgerEntry, Order, OutboxMessage, Ticket, User

_ledger, _outbox, _tickets = LedgerEntry.__table__, OutboxMessage.__table__, Ticket.__table__
_KEYS = {"ledger": (_ledger, "idempotency_key"), "outbox": (_outbox, "message_key"), "tickets": (_tickets, "ticket_key")}
ERASED_RESULT = "erased"
"""The ``result`` of an anonymised ledger row (a refusal's: ``"Error: erased"``)."""


class SideRecord(NamedTuple):
    """A row of ``table`` (``ledger``, ``outbox`` or ``tickets``) in ``store``, by its key;
    ``user_id`` is a ticket's customer, ``to_email`` an email's recipient (else None)."""

    table: str
    store: str
    key: str
    created_at: datetime
    user_id: Optional[str] = None
    to_email: Optional[str] = None


class CustomerFootprint(NamedTuple):
    """What one store holds of a customer: their email (lower case) and their order ids."""

    email: Optional[str]
    order_ids: frozenset[str]


class RecordErasure(Database):
    """Finding and forgetting side records (ledger, outbox, tickets) of every store."""

    def customer_footprint(self, user_id: str) -> dict[str, CustomerFootprint]:
        """Per store: the customer's email and order ids (stores where they have neither
        are left out)."""
        orders: dict[str, set[str]] = {}
        emails: dict[str, str] = {}
        with self._tx(write=False) as conn:
            for store, order_id in conn.execute(sa.select(Order.store, Order.order_id).where(Order.user_id == user_id)):
                orders.setdefault(store, set()).add(order_id)
            for store, email in conn.execute(sa.select(User.store, User.email_lc).where(User.user_id == user_id)):
                emails[store] = email
        return {store: CustomerFootprint(emails.get(store), frozenset(orders.get(store, ())))
                for store in sorted(set(orders) | set(emails))}

    def side_records(self, fragments: Iterable[str] = (), *, user_id: Optional[str] = None,
                     emails: Iterable[str] = (), before: Optional[datetime] = None) -> list[SideRecord]:
        """Rows of every store whose key contains any of ``fragments``, tickets of
        ``user_id``, and emails to any of ``emails`` (case-insensitive); only rows created
        before ``before`` (aware datetime) when given. A superset: the caller checks each
        key. Sorted by table, store and key; each row once."""
        fragments = sorted({f for f in fragments if f})
        emails = sorted({e.lower() for e in emails if e})
        found: dict[tuple[str, str, str], SideRecord] = {}
        with self._tx(write=False) as conn:
            for name, (table, key_column) in _KEYS.items():
                key = table.c[key_column]
                conditions = [sa.or_(*(key.contains(f, autoescape=True) for f in chunk)) for chunk in _chunks(fragments)]
                if name == "tickets" and user_id:
                    conditions.append(table.c.user_id == user_id)
                if name == "outbox" and emails:
                    conditions += [sa.func.lower(table.c.to_email).in_(chunk) for chunk in _chunks(emails)]
                extra = [table.c.user_id if name == "tickets" else sa.null(),
                         table.c.to_email if name == "outbox" else sa.null()]
                for condition in conditions:
                    query = sa.select(table.c.store, key, table.c.created_at, *extra).where(condition)
                    if before is not None:
                        query = query.where(table.c.created_at < before)
                    for store, k, created, owner, to in conn.execute(query):
                        found[(name, store, k)] = SideRecord(name, store, k, created, owner, to)
        return [found[k] for k in sorted(found)]

    def delete_records(self, records: Iterable[SideRecord]) -> dict[str, int]:
        """Delete the given rows in one transaction; returns rows deleted per table."""
        return self._per_row(records, lambda table, cond: sa.delete(table).where(cond))

    def anonymise_ledger(self, records: Iterable[SideRecord]) -> int:
        """Replace the ``result`` of the given ledger rows with ``ERASED_RESULT`` (``"Error:
        erased"`` for a refusal), keeping key, tool, arguments digest and ``ok``: a retried
        request with the same key still gets "already recorded" and is never applied twice.
        Other tables' rows are ignored. Returns the rows changed (an anonymised row is not
        changed again)."""
        result = sa.case((_ledger.c.ok.is_(True), ERASED_RESULT), else_="Error: " + ERASED_RESULT)
        ledger_rows = [r for r in records if r.table == "ledger"]
        fresh = _ledger.c.result.notin_([ERASED_RESULT, "Error: " + ERASED_RESULT])  # count each row once
        return self._per_row(ledger_rows, lambda table, cond: sa.update(table).where(cond, fresh).values(result=result)
                             ).get("ledger", 0)

    def _per_row(self, records: Iterable[SideRecord], statement) -> dict[str, int]:
        counts = {name: 0 for name in _KEYS}
        with self._tx(write=True) as conn:
            for r in records:
                table, key_column = _KEYS[r.table]
                cond = sa.and_(table.c.store == r.store, table.c[key_column] == r.key)
                counts[r.table] += conn.execute(statement(table, cond)).rowcount
        return counts


def _chunks(values: list[str], size: int = 50) -> list[list[str]]:
    # bounded statements: SQLite limits bound parameters, and a long OR of LIKEs plans badly
    return [values[i:i + size] for i in range(0, len(values), size)]
