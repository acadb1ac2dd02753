"""Side channels of the retail system: the customer-email outbox and human hand-off
tickets, each written at most once per caller-chosen key (race-safe)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from systems.retail.engine import Database
from systems.retail.schema import OutboxMessage, Ticket

_outbox, _tickets = OutboxMessage.__table__, Ticket.__table__


class SideChannels(Database):
    """The outbox and the tickets of every store."""

    def _insert_once(self, table: sa.Table, row: dict[str, Any]) -> bool:
        with self._tx(write=True) as conn:
            return self._inserted(conn, table, row)

    def enqueue_email(self, store: str, message_key: str, to_email: str, subject: str, body: str) -> bool:
        """Queue an email once per ``message_key``; True if newly queued (race-safe)."""
        row = {"store": store, "message_key": message_key, "to_email": to_email, "subject": subject, "body": body}
        return self._insert_once(_outbox, row)

    def open_ticket(self, store: str, ticket_key: str, user_id: str | None, summary: str) -> bool:
        """Open a human hand-off ticket once per ``ticket_key``; True if newly opened."""
        row = {"store": store, "ticket_key": ticket_key, "user_id": user_id, "summary": summary}
        return self._insert_once(_tickets, row)

    def ticket_opened(self, store: str, ticket_key: str) -> bool:
        """True if ``store`` holds a ticket under ``ticket_key`` (a read)."""
        with self._tx(write=False) as conn:
            found = conn.execute(sa.select(_tickets.c.ticket_key).where(
                _tickets.c.store == store, _tickets.c.ticket_key == ticket_key).limit(1)).first()
        return found is not None

    def outbox_messages(self, store: str) -> list[dict[str, Any]]:
        """Queued emails of ``store`` (dicts of the outbox columns), oldest first."""
        return self._rows(_outbox, store)

    def tickets(self, store: str) -> list[dict[str, Any]]:
        """Tickets of ``store`` (dicts of the tickets columns), oldest first."""
        return self._rows(_tickets, store)
