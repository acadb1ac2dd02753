"""Limits shared by every API process and worker, kept in statekeeper's own database (the
journal's, ``Settings.journal_url``), so several API processes enforce one limit between them:

- ``KeyRates``: each API key's request rate. The decision is pyrate-limiter's GCRA (a leaky
  bucket kept as one theoretical arrival time per key, ``pyrate_limiter.GCRA``); its state, a
  tuple of integer microseconds, lives in table ``api_key_rates`` (``SqlStateStore``), read and
  written in one transaction that holds the row's write lock (PostgreSQL ``SELECT ... FOR
  UPDATE``; SQLite's one writer), so two processes never admit on the same state.
- ``TenantLedger``: which conversations each tenant has open (table ``tenant_conversations``: a
  row per conversation, ``closed_at`` set once it is seen finished) and the tokens its
  conversations' model calls used today (UTC), from the journal's ``model_calls``.

Times are UTC; every method is one transaction and raises ``sqlalchemy.exc.SQLAlchemyError``
when the database fails.
"""

from __future__ import annotations

import json
import zlib
from datetime import datetime, timedelta, timezone
from typing import Iterable, List, Optional

import sqlalchemy as sa
from pyrate_limiter import GCRA, Duration, Rate, StateStore, WallClock
from pyrate_limiter.abstracts.algorithm import Decision, State, StateAlgorithm
from sqlalchemy.engine import Connection, Engine

from activities.store.tables import ID, TIME, create_schema, model_calls

metadata = sa.MetaData()

api_key_rates = sa.Table(
    "api_key_rates", metadata,
    sa.Column("key_id", sa.String(12), primary_key=True),
    sa.Column("state", sa.String(200), nullable=False),
    sa.Column("updated_at", TIME, nullable=False),
)
"""One row per API key that made a request: its GCRA state (JSON list of integers)."""

tenant_conversations = sa.Table(
    "tenant_conversations", metadata,
    sa.Column("conversation_id", ID, primary_key=True),
    sa.Column("tenant", sa.String(64), nullable=False, index=True),
    sa.Column("opened_at", TIME, nullable=False),
    sa.Column("closed_at", TIME, nullable=True),
)
"""Which tenant each conversation belongs to, and whether it still counts as open."""

RECONCILE_GRACE = timedelta(seconds=60)
"""A conversation reserved this recently counts as open even when Temporal's list does not show
it yet: its start may still be on its way, and list results lag the start."""


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _lock_tenant(conn: Connection, tenant: str) -> None:
    """Serialize the tenant's reservations on PostgreSQL (a transaction-scoped advisory lock);
    SQLite serializes every writer already."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"),
                     {"k": zlib.crc32(f"statekeeper-tenant:{tenant}".encode()) & 0x7FFFFFFF})


def _insert_missing(conn: Connection, table: sa.Table, values: dict, key: str) -> bool:
    """``INSERT ... ON CONFLICT (key) DO NOTHING`` in the dialect at hand; True if it inserted
    the row. On SQLite the
    statement takes the database's write lock even when it inserts nothing, which is what
    makes the read that follows in the same transaction safe."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    statement = insert(table).values(**values).on_conflict_do_nothing(index_elements=[key]).returning(table.c[key])
    return conn.execute(statement).first() is not None  # rowcount is -1 here with psycopg


class SqlStateStore(StateStore):
    """pyrate-limiter ``StateStore`` of one key's state in ``api_key_rates``: ``check`` reads,
    steps and writes in one transaction holding the row's write lock."""

    is_async = False
    default_clock = WallClock()  # compared across processes and hosts

    def __init__(self, engine: Engine, key_id: str) -> None:
        self.engine, self.key_id = engine, key_id

    def check(self, algorithm: StateAlgorithm, rates: List[Rate], now: int, weight: int) -> Decision:
        with self.engine.begin() as conn:
            initial = json.dumps(list(algorithm.initial(rates)))
            _insert_missing(conn, api_key_rates, {"key_id": self.key_id, "state": initial,
                                                  "updated_at": _utc_now()}, "key_id")
            stored = conn.execute(sa.select(api_key_rates.c.state).where(api_key_rates.c.key_id == self.key_id)
                                  .with_for_update()).scalar_one()
            state = _state(stored, algorithm, rates)
            new_state, decision = algorithm.step(rates, state, now, weight)
            if decision.allowed:
                conn.execute(api_key_rates.update().where(api_key_rates.c.key_id == self.key_id)
                             .values(state=json.dumps(list(new_state)), updated_at=_utc_now()))
            return decision

    def read(self, algorithm: StateAlgorithm, rates: List[Rate]) -> State:
        with self.engine.connect() as conn:
            stored = conn.execute(sa.select(api_key_rates.c.state)
                                  .where(api_key_rates.c.key_id == self.key_id)).scalar_one_or_none()
        return algorithm.initial(rates) if stored is None else _state(stored, algorithm, rates)

    def reset(self) -> None:
        with self.engine.begin() as conn:
            conn.execute(api_key_rates.delete().where(api_key_rates.c.key_id == self.key_id))


def _state(stored: str, algorithm: StateAlgorithm, rates: List[Rate]) -> State:
    try:
        values = tuple(int(v) for v in json.loads(stored))
    except (ValueError, TypeError):
        return algorithm.initial(rates)
    # a key whose limit changed kind keeps no stale state shape
    return values if len(values) == len(rates) else algorithm.initial(rates)


class KeyRates:
    """``KeyRates(engine)``: the request rate limit of API keys, shared by every process using
    ``engine``'s database. ``admit(key_id, per_minute)`` answers how long to wait."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.algorithm = GCRA()
        self.clock = WallClock()

    def admit(self, key_id: str, per_minute: int) -> Optional[float]:
        """Count one request of ``key_id`` against ``per_minute`` requests a minute (a burst of
        ``per_minute`` at once, then one every 60/``per_minute`` s); None when admitted, else
        the seconds until one more would be (> 0). Raises ``ValueError`` for ``per_minute`` < 1."""
        if per_minute < 1:
            raise ValueError("a rate limit is at least 1 request a minute")
        rates = [Rate(per_minute, Duration.MINUTE)]
        decision = SqlStateStore(self.engine, key_id).check(self.algorithm, rates, self.clock.now(), 1)
        if decision.allowed:
            return None
        return max(0.001, (decision.retry_after_ms or 1000) / 1000)


class TenantLedger:
    """``TenantLedger(engine)``: each tenant's open conversations and tokens today."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def ready(self) -> "TenantLedger":
        """Bring the database to the newest schema first (once per process and database; a
        worker's journal database may be new); returns self."""
        create_schema(self.engine)
        return self

    def reserve(self, tenant: str, conversation_id: str, limit: Optional[int]) -> bool:
        """Count ``conversation_id`` as one of ``tenant``'s open conversations, if it is not
        counted already and the tenant has fewer than ``limit`` open (None: no limit).
        False when it is at the limit (nothing is recorded then)."""
        return self.take(tenant, conversation_id, limit) is not None

    def take(self, tenant: str, conversation_id: str, limit: Optional[int]) -> Optional[bool]:
        """``reserve``, telling more: True when a place was taken now, False when the
        conversation was recorded already (its start is idempotent: never refused), None at
        the limit."""
        with self.engine.begin() as conn:
            _lock_tenant(conn, tenant)
            inserted = _insert_missing(conn, tenant_conversations, {
                "conversation_id": conversation_id, "tenant": tenant, "opened_at": _utc_now(), "closed_at": None},
                "conversation_id")
            if not inserted or limit is None:
                return inserted
            others = conn.execute(sa.select(sa.func.count()).select_from(tenant_conversations).where(
                tenant_conversations.c.tenant == tenant, tenant_conversations.c.closed_at.is_(None),
                tenant_conversations.c.conversation_id != conversation_id)).scalar_one()
            if others < limit:
                return True
            conn.execute(tenant_conversations.delete().where(
                tenant_conversations.c.conversation_id == conversation_id))
            return None

    def release(self, conversation_id: str) -> None:
        """Forget a place taken (``take``) for a conversation that never started; a
        conversation seen closed keeps its row (its model calls still count for its tenant)."""
        with self.engine.begin() as conn:
            conn.execute(tenant_conversations.delete().where(
                tenant_conversations.c.conversation_id == conversation_id, tenant_conversations.c.closed_at.is_(None)))

    def known(self, tenant: str, conversation_id: str) -> None:
        """Record that ``conversation_id`` belongs to ``tenant`` (a conversation started without the
        API, e.g. by the CLI, is then counted too); a recorded one is left as it is."""
        with self.engine.begin() as conn:
            _insert_missing(conn, tenant_conversations, {"conversation_id": conversation_id, "tenant": tenant,
                                                         "opened_at": _utc_now(), "closed_at": None},
                            "conversation_id")

    def open_ids(self, tenant: str) -> list[str]:
        """The conversations counted open for ``tenant``."""
        with self.engine.connect() as conn:
            return list(conn.execute(sa.select(tenant_conversations.c.conversation_id).where(
                tenant_conversations.c.tenant == tenant, tenant_conversations.c.closed_at.is_(None))).scalars())

    def close_finished(self, tenant: str, running: Iterable[str], now: Optional[datetime] = None) -> int:
        """Mark closed every open conversation of ``tenant`` that is not in ``running`` (the ids
        Temporal lists as running) and was reserved before ``RECONCILE_GRACE``; returns how many."""
        now = now or _utc_now()
        alive = set(running)
        with self.engine.begin() as conn:
            _lock_tenant(conn, tenant)
            rows = conn.execute(sa.select(tenant_conversations.c.conversation_id, tenant_conversations.c.opened_at)
                                .where(tenant_conversations.c.tenant == tenant,
                                       tenant_conversations.c.closed_at.is_(None))).all()
            done = [r.conversation_id for r in rows
                    if r.conversation_id not in alive and _aware(r.opened_at) < now - RECONCILE_GRACE]
            if done:
                conn.execute(tenant_conversations.update().where(tenant_conversations.c.conversation_id.in_(done))
                             .values(closed_at=now))
        return len(done)

    def tokens_today(self, tenant: str, now: Optional[datetime] = None) -> int:
        """Tokens (input, cache reads and writes, output) of the model calls that ``tenant``'s
        conversations made since 00:00 UTC of ``now``'s day."""
        start = day_start(now or _utc_now())
        total = (model_calls.c.input_tokens + model_calls.c.output_tokens
                 + model_calls.c.cache_read_input_tokens + model_calls.c.cache_creation_input_tokens)
        query = (sa.select(sa.func.coalesce(sa.func.sum(total), 0))
                 .select_from(model_calls.join(tenant_conversations,
                                               model_calls.c.conversation_id == tenant_conversations.c.conversation_id))
                 .where(tenant_conversations.c.tenant == tenant, model_calls.c.recorded_at >= start))
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())


def day_start(now: datetime) -> datetime:
    """00:00 UTC of ``now``'s day (UTC)."""
    now = _aware(now)
    return datetime(now.year, now.month, now.day, tzinfo=timezone.utc)


def _aware(value: datetime) -> datetime:
    # SQLite hands back naive datetimes: they were stored as UTC
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
