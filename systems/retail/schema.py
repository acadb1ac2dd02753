"""Tables of the retail system of record (SQLAlchemy 2.x declarative).

Every row carries ``store``, a namespace: many isolated copies of the τ-bench data
live in one database (the benchmark runner gives each task its own store), and every
primary key starts with it.

Documents are the benchmark's dicts verbatim in a ``JSON`` column: text JSON on both
SQLite and PostgreSQL (``json``, deliberately not ``jsonb``, which would reorder keys),
so floats and key order survive the round trip and :meth:`RetailBackend.export`
reproduces the files exactly. The few scalar columns beside ``doc`` are lookup keys
derived from it and rewritten whenever it is.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    """The current time, timezone-aware UTC (column default of ``created_at``)."""
    return datetime.now(timezone.utc)


class UTCDateTime(TypeDecorator):
    """Timezone-aware UTC datetimes on every backend (SQLite keeps no offset)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        """Aware datetimes are stored converted to UTC; naive ones as given (taken as UTC)."""
        return value.astimezone(timezone.utc) if value is not None and value.tzinfo else value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        """Values read back without an offset (SQLite) are marked as UTC."""
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value


class Base(DeclarativeBase):
    """Declarative base of the retail tables (``Base.metadata`` creates them)."""


class User(Base):
    """A user profile; ``email_lc``/``first_lc``/``last_lc``/``zip`` serve the
    find_user_* tools, which match case-insensitively (Python ``str.lower``)."""

    __tablename__ = "users"
    store: Mapped[str] = mapped_column(String(128), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    email_lc: Mapped[str] = mapped_column(String(320))
    first_lc: Mapped[str] = mapped_column(String(128))
    last_lc: Mapped[str] = mapped_column(String(128))
    zip: Mapped[str] = mapped_column(String(32))
    doc: Mapped[dict[str, Any]] = mapped_column(JSON)

    __table_args__ = (
        Index("ix_users_store_email", "store", "email_lc"),
        Index("ix_users_store_name_zip", "store", "last_lc", "zip"),
    )


class Order(Base):
    """An order; ``position`` is its index in orders.json, so export keeps dict order."""

    __tablename__ = "orders"
    store: Mapped[str] = mapped_column(String(128), primary_key=True)
    order_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    user_id: Mapped[str] = mapped_column(String(128))
    status: Mapped[str] = mapped_column(String(64))
    doc: Mapped[dict[str, Any]] = mapped_column(JSON)

    __table_args__ = (Index("ix_orders_store_user", "store", "user_id"),)


class Product(Base):
    """A product type with all its variants (item_id -> options, price, available)."""

    __tablename__ = "products"
    store: Mapped[str] = mapped_column(String(128), primary_key=True)
    product_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    doc: Mapped[dict[str, Any]] = mapped_column(JSON)


class LedgerEntry(Base):
    """One row per idempotency key: the recorded result of a write (applied or error).

    The primary key is what makes a write exactly-once: a second attempt with the same
    key finds the row (or collides with it) and returns ``result`` instead of applying.
    """

    __tablename__ = "ledger"
    store: Mapped[str] = mapped_column(String(128), primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(String(256), primary_key=True)
    tool: Mapped[str] = mapped_column(String(64))
    args_digest: Mapped[str] = mapped_column(String(64))
    result: Mapped[str] = mapped_column(Text)
    ok: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class OutboxMessage(Base):
    """An email to send (e.g. return instructions), at most one per ``message_key``."""

    __tablename__ = "outbox"
    store: Mapped[str] = mapped_column(String(128), primary_key=True)
    message_key: Mapped[str] = mapped_column(String(256), primary_key=True)
    to_email: Mapped[str] = mapped_column(String(320))
    subject: Mapped[str] = mapped_column(Text)
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Ticket(Base):
    """A hand-off to a human agent, at most one per ``ticket_key``."""

    __tablename__ = "tickets"
    store: Mapped[str] = mapped_column(String(128), primary_key=True)
    ticket_key: Mapped[str] = mapped_column(String(256), primary_key=True)
    user_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    summary: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


STORE_TABLES = tuple(m.__table__ for m in (User, Order, Product, LedgerEntry, OutboxMessage, Ticket))
"""Every table with a ``store`` column, i.e. everything :meth:`drop_store` deletes."""
