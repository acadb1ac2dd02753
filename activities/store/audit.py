"""The audit log: who read or changed personal data, what, when — an append-only SQL table
``audit_log`` in our own journal database (``Settings.resolved_journal_url()``; never the
system of record), SQLite or PostgreSQL.

Rows are only ever inserted: this module has no update and no delete. ``subject`` is an
opaque id (a conversation id, a refund id, a customer pseudonym), ``actor`` the caller's
key id (``activities.store.api_keys``) or a named local actor such as ``cli`` or ``dev``; ``detail``
holds no personal data in the clear (what kind of read, a count, a route), never an email,
a name or an address.

Used by the HTTP API (``starter.api.auth``) for every read of personal data and by erasure and
retention purges for what they removed.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Optional

import sqlalchemy as sa
from pydantic import BaseModel

from activities.store.tables import create_schema, make_engine

metadata = sa.MetaData()

audit_log = sa.Table(
    "audit_log", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.DateTime(timezone=True), nullable=False, index=True),
    sa.Column("actor", sa.String(200), nullable=False, index=True),
    sa.Column("action", sa.String(100), nullable=False),
    sa.Column("subject", sa.String(1000), nullable=False, index=True),
    sa.Column("detail", sa.Text, nullable=False, default=""),
)

MAX_DETAIL = 2000
"""Characters of ``detail`` kept; longer text is cut (a bounded row, whatever the caller passes)."""


class AuditEntry(BaseModel):
    """One audit row: ``id`` increasing in insertion order, ``at`` UTC."""

    id: int
    at: datetime
    actor: str
    action: str
    subject: str
    detail: str = ""


def _utc(value: datetime) -> datetime:
    # SQLite hands back naive datetimes: they were stored as UTC
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


class AuditLog:
    """The audit log at SQLAlchemy ``url`` (tables migrated to the newest schema if needed). Thread-safe; each
    call is one transaction. Raises ``sqlalchemy.exc.SQLAlchemyError`` when the database fails
    (a read of personal data whose audit entry cannot be written must not be served)."""

    def __init__(self, url: str) -> None:
        self.engine = make_engine(url)
        create_schema(self.engine)  # the journal database's migrations (activities.store.migrate)

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    def record(self, actor: str, action: str, subject: str, detail: str = "") -> None:
        """Append one entry stamped now (UTC). ``action`` is a short verb such as
        ``read_state``, ``read_transcript``, ``list_by_customer``, ``erase_customer``."""
        with self.engine.begin() as conn:
            conn.execute(audit_log.insert().values(
                at=datetime.now(timezone.utc), actor=actor[:200], action=action[:100], subject=subject[:1000],
                detail=(detail or "")[:MAX_DETAIL]))

    def entries(self, subject: Optional[str] = None, actor: Optional[str] = None,
                action: Optional[str] = None, limit: int = 1000) -> list[AuditEntry]:
        """Entries matching every given filter, oldest first, at most ``limit``."""
        query = sa.select(audit_log).order_by(audit_log.c.id).limit(limit)
        if subject is not None:
            query = query.where(audit_log.c.subject == subject)
        if actor is not None:
            query = query.where(audit_log.c.actor == actor)
        if action is not None:
            query = query.where(audit_log.c.action == action)
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [AuditEntry(**{**row, "at": _utc(row["at"])}) for row in rows]
