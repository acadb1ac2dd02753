"""Tables of the journal (SQLite or PostgreSQL) and its engine.

``model_calls`` (one row per model call, written by the model activity), ``verdicts``
(what the workflow made of each call's proposal) ``transcript`` (every user message
and every text the user was shown), ``events`` (the public events callers read,
``workflows.domain.journal``) and ``refund_events`` (a refund's). Each is keyed by business
identity, so writes are upserts: a retried activity or a reset re-running a turn overwrites,
never duplicates.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine

from activities.store.migrate import upgrade
from systems.retail.engine import private_sqlite_file

metadata = sa.MetaData()

ID = sa.String(1000)
"""Conversation and customer ids (Temporal's own limit on workflow ids is 1000 characters)."""
TIME = sa.DateTime(timezone=True)

model_calls = sa.Table(
    "model_calls", metadata,
    sa.Column("conversation_id", ID, primary_key=True),
    sa.Column("turn", sa.Integer, primary_key=True),
    sa.Column("call_seq", sa.Integer, primary_key=True),
    sa.Column("customer_id", ID, nullable=True, index=True),
    sa.Column("prompt_version", sa.String(100), nullable=False),
    sa.Column("model", sa.String(200), nullable=False),
    sa.Column("view", sa.JSON, nullable=False),
    sa.Column("proposal", sa.JSON, nullable=True),
    sa.Column("stop_reason", sa.String(50), nullable=True),
    sa.Column("input_tokens", sa.Integer, nullable=False, default=0),
    sa.Column("output_tokens", sa.Integer, nullable=False, default=0),
    # prompt caching (migration 0002): input_tokens is the uncached rest of the input
    sa.Column("cache_read_input_tokens", sa.Integer, nullable=False, server_default="0"),
    sa.Column("cache_creation_input_tokens", sa.Integer, nullable=False, server_default="0"),
    sa.Column("recorded_at", TIME, nullable=False, index=True),
)

verdicts = sa.Table(
    "verdicts", metadata,
    sa.Column("conversation_id", ID, primary_key=True),
    sa.Column("turn", sa.Integer, primary_key=True),
    sa.Column("call_seq", sa.Integer, primary_key=True),
    sa.Column("customer_id", ID, nullable=True, index=True),
    sa.Column("verdict", sa.String(30), nullable=False),
    sa.Column("rule", sa.String(200), nullable=True, index=True),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("outcome", sa.String(20), nullable=True),
    sa.Column("recorded_at", TIME, nullable=False),
)

transcript = sa.Table(
    "transcript", metadata,
    sa.Column("conversation_id", ID, primary_key=True),
    sa.Column("turn", sa.Integer, primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("customer_id", ID, nullable=True, index=True),
    sa.Column("role", sa.String(20), nullable=False),
    sa.Column("kind", sa.String(20), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("message_id", sa.String(1000), nullable=True),
    sa.Column("at", TIME, nullable=False, index=True),
)

events = sa.Table(
    "events", metadata,
    # keyed by (conversation, sequence): a stream reads a range of it; the business key is
    # unique per conversation, so a re-sent event is found and left as it was
    sa.Column("conversation_id", ID, primary_key=True),
    sa.Column("sequence", sa.Integer, primary_key=True),
    sa.Column("event_key", sa.String(1100), nullable=False),
    sa.Column("event_id", sa.String(40), nullable=False),
    sa.Column("customer_id", ID, nullable=True, index=True),
    sa.Column("type", sa.String(50), nullable=False),
    sa.Column("data", sa.JSON, nullable=False),
    sa.Column("at", TIME, nullable=False, index=True),
    sa.UniqueConstraint("conversation_id", "event_key", name="uq_events_conversation_key"),
)

refund_events = sa.Table(
    "refund_events", metadata,
    # a refund's events, as ``events`` a conversation's, keyed by (refund, sequence). Apart from
    # ``events``: a conversation id is any text a caller chose, so it could equal a refund id, and
    # one table keyed by either would mix the two processes' streams
    sa.Column("refund_id", ID, primary_key=True),
    sa.Column("sequence", sa.Integer, primary_key=True),
    sa.Column("event_key", sa.String(1100), nullable=False),
    sa.Column("event_id", sa.String(40), nullable=False),
    sa.Column("conversation_id", ID, nullable=True, index=True),
    sa.Column("customer_id", ID, nullable=True, index=True),
    sa.Column("type", sa.String(50), nullable=False),
    sa.Column("data", sa.JSON, nullable=False),
    sa.Column("at", TIME, nullable=False, index=True),
    sa.UniqueConstraint("refund_id", "event_key", name="uq_refund_events_refund_key"),
)
"""``conversation_id``: the conversation that started the refund (None for a backend's
request): its erasure and retention take the refund's events with it."""

TABLES = (model_calls, verdicts, transcript, events)


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets readers (the CLI, the API) run while workers write; writers wait for the
    # lock for a bounded time instead of failing at once.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


def make_engine(url: str) -> Engine:
    """Engine for the journal at ``url``: SQLite (a file; WAL, 5 s busy timeout) or
    PostgreSQL (a small pool with pre-ping, 5 s connect timeout)."""
    if sa.make_url(url).get_backend_name() == "sqlite":
        private_sqlite_file(url)  # transcripts are personal data: 0600, like the system of record
        engine = sa.create_engine(url, connect_args={"check_same_thread": False, "timeout": 5})
        event.listen(engine, "connect", _sqlite_on_connect)
        return engine
    return sa.create_engine(url, pool_size=5, max_overflow=5, pool_pre_ping=True,
                            connect_args={"connect_timeout": 5})


def create_schema(engine: Engine) -> None:
    """Bring the journal's database to the newest schema: its Alembic migrations
    (``activities.store.migrate.upgrade``; idempotent, serialized across processes)."""
    upgrade(engine)
