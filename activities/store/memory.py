"""The memory store: facts remembered about customers across conversations
(``workflows.domain.memory``), in statekeeper's own journal database (table ``memory_facts``),
apart from any run's state.

Rows are scoped to (tenant, store, customer pseudonym) and keyed by ``fact_id`` (one fact per
kind per customer). ``remember`` is an upsert that keeps the latest confirmation: two
conversations of the same customer confirming different values at once both succeed, and the
value confirmed last (by the workflow's clock) is the one kept; a retried write with the same
confirmation time changes nothing. Expired facts are never read and are removed by
``purge_expired`` (the retention purge); ``erase_customer`` removes every fact of a customer.

Raises ``sqlalchemy.exc.SQLAlchemyError`` when the database fails. Thread-safe; each call is
one transaction.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from datetime import timedelta
from typing import Callable, NamedTuple, Optional

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from activities.store.tables import ID, TIME, create_schema, make_engine
from workflows.domain.memory import MAX_VALUE_CHARS, MAX_WORDS_CHARS, FactKind, FactSource, MemoryFact

metadata = sa.MetaData()

memory_facts = sa.Table(
    "memory_facts", metadata,
    sa.Column("fact_id", sa.String(40), primary_key=True),
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("store", sa.String(100), nullable=False),
    sa.Column("customer", sa.String(64), nullable=False),
    sa.Column("kind", sa.String(40), nullable=False),
    sa.Column("value", sa.String(MAX_VALUE_CHARS), nullable=False),
    sa.Column("order_id", sa.String(100), nullable=True),
    sa.Column("source_conversation", ID, nullable=False),
    sa.Column("source_turn", sa.Integer, nullable=False),
    sa.Column("source_words", sa.String(MAX_WORDS_CHARS), nullable=False),
    sa.Column("learnt_at", TIME, nullable=False),
    sa.Column("confirmed_at", TIME, nullable=False),
    sa.Column("expires_at", TIME, nullable=False, index=True),
    sa.Index("ix_memory_facts_owner", "tenant", "customer"),
)

memory_writes = sa.Table(
    "memory_writes", metadata,
    sa.Column("key_digest", sa.String(64), primary_key=True),
    sa.Column("tool", sa.String(40), nullable=False),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("customer", sa.String(64), nullable=False, index=True),
    sa.Column("outcome", sa.String(20), nullable=False),
    sa.Column("result", sa.String(2000), nullable=False),
    sa.Column("at", TIME, nullable=False, index=True),
)
"""The memory writes' ledger: one row per idempotency key (its SHA-256: a key names the customer
id, which holds the name), written in the transaction of the write's effect, with the call's
digest and its result (which holds no remembered value)."""
LEDGER_DAYS = 30
"""Days a ledger row is kept: a conversation's retried or reset write finds its row well within it."""


def _key_digest(idempotency_key: str) -> str:
    return hashlib.sha256(idempotency_key.encode()).hexdigest()


class RecordedWrite(NamedTuple):
    """A ledger row: the call's ``digest``, its ``outcome`` and ``result``."""

    digest: str
    outcome: str
    result: str


def _utc(value: datetime) -> datetime:
    # SQLite hands back naive datetimes: they were stored as UTC
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _fact(row: sa.Row) -> MemoryFact:
    return MemoryFact(fact_id=row.fact_id, kind=FactKind(row.kind), value=row.value, order_id=row.order_id,
                      source=FactSource(conversation_id=row.source_conversation, turn=row.source_turn,
                                        words=row.source_words),
                      learnt_at=_utc(row.learnt_at), confirmed_at=_utc(row.confirmed_at),
                      expires_at=_utc(row.expires_at))


def _remember(conn: Connection, tenant: str, store: str, customer: str, fact: MemoryFact) -> MemoryFact:
    row = {"fact_id": fact.fact_id, "tenant": tenant, "store": store, "customer": customer,
           "kind": fact.kind.value, "value": fact.value, "order_id": fact.order_id,
           "source_conversation": fact.source.conversation_id, "source_turn": fact.source.turn,
           "source_words": fact.source.words[:MAX_WORDS_CHARS], "learnt_at": fact.learnt_at,
           "confirmed_at": fact.confirmed_at, "expires_at": fact.expires_at}
    table = memory_facts
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    insert = dialect.insert(table).values(**row)
    later = insert.excluded.confirmed_at >= table.c.confirmed_at
    same_value = sa.and_(table.c.value == insert.excluded.value,
                         sa.func.coalesce(table.c.order_id, "") == sa.func.coalesce(insert.excluded.order_id, ""))
    updates = {name: insert.excluded[name] for name in row if name not in ("fact_id", "learnt_at")}
    updates["learnt_at"] = sa.case((same_value, table.c.learnt_at), else_=insert.excluded.learnt_at)
    conn.execute(insert.on_conflict_do_update(index_elements=[table.c.fact_id], set_=updates, where=later))
    return _fact(conn.execute(sa.select(table).where(table.c.fact_id == fact.fact_id)).one())


class MemoryStore:
    """The memory facts at SQLAlchemy ``url`` (schema migrated to the newest on first use)."""

    def __init__(self, url: str) -> None:
        self._engine = make_engine(url)
        create_schema(self._engine)

    def remember(self, tenant: str, store: str, customer: str, fact: MemoryFact) -> MemoryFact:
        """Keep ``fact`` for ``customer`` (a pseudonym) unless a later confirmation of the same
        fact id is kept already; a value equal to the kept one keeps its ``learnt_at``. Returns
        the fact as kept now (the other conversation's when it confirmed later)."""
        with self._engine.begin() as conn:
            return _remember(conn, tenant, store, customer, fact)

    def facts(self, tenant: str, customer: str, now: datetime, store: Optional[str] = None) -> list[MemoryFact]:
        """``customer``'s facts in ``tenant`` (and ``store`` when given) not expired at ``now``,
        by kind."""
        query = sa.select(memory_facts).where(memory_facts.c.tenant == tenant, memory_facts.c.customer == customer,
                                              memory_facts.c.expires_at > now)
        if store is not None:
            query = query.where(memory_facts.c.store == store)
        with self._engine.connect() as conn:
            rows = conn.execute(query.order_by(memory_facts.c.kind, memory_facts.c.store)).all()
        return [_fact(row) for row in rows]

    def forget(self, tenant: str, customer: str, fact_id: str) -> bool:
        """Remove one fact of ``customer``; False when there is none with that id (or another's)."""
        with self._engine.begin() as conn:
            done = conn.execute(sa.delete(memory_facts).where(
                memory_facts.c.fact_id == fact_id, memory_facts.c.tenant == tenant,
                memory_facts.c.customer == customer))
        return done.rowcount > 0

    def forget_all(self, tenant: str, customer: str) -> int:
        """Remove every fact of ``customer`` in ``tenant``; how many were removed (0 the second time)."""
        with self._engine.begin() as conn:
            done = conn.execute(sa.delete(memory_facts).where(
                memory_facts.c.tenant == tenant, memory_facts.c.customer == customer))
        return done.rowcount

    def erase_customer(self, customer: str) -> int:
        """Remove every fact of ``customer`` (a pseudonym) in every tenant, and its writes' ledger
        rows (erasure); how many facts."""
        with self._engine.begin() as conn:
            conn.execute(sa.delete(memory_writes).where(memory_writes.c.customer == customer))
            return conn.execute(sa.delete(memory_facts).where(memory_facts.c.customer == customer)).rowcount

    # --- the conversation's writes: effect and ledger row in one transaction ---

    def recorded(self, idempotency_key: str) -> Optional[RecordedWrite]:
        """The ledger row of ``idempotency_key``, or None when that write never applied."""
        with self._engine.connect() as conn:
            row = conn.execute(sa.select(memory_writes.c.digest, memory_writes.c.outcome, memory_writes.c.result)
                               .where(memory_writes.c.key_digest == _key_digest(idempotency_key))).first()
        return None if row is None else RecordedWrite(row.digest, row.outcome, row.result)

    def apply_once(self, idempotency_key: str, tool: str, digest: str, customer: str, now: datetime,
                   effect: Callable[[Connection], tuple[str, str]]) -> tuple[RecordedWrite, bool]:
        """Run ``effect`` (returning ``(outcome, result)``) and record it under ``idempotency_key``
        in one transaction, once: when the key is recorded already (a retry, or the same write
        racing), nothing runs and the recorded row comes back. Returns ``(row, replayed)``."""
        try:
            with self._engine.begin() as conn:
                conn.execute(sa.insert(memory_writes).values(
                    key_digest=_key_digest(idempotency_key), tool=tool, digest=digest, customer=customer,
                    outcome="pending", result="", at=now))
                outcome, result = effect(conn)
                conn.execute(sa.update(memory_writes)
                             .where(memory_writes.c.key_digest == _key_digest(idempotency_key))
                             .values(outcome=outcome, result=result[:2000]))
            return RecordedWrite(digest, outcome, result[:2000]), False
        except sa.exc.IntegrityError:
            recorded = self.recorded(idempotency_key)
            if recorded is None:
                raise
            return recorded, True

    def forget_kinds(self, conn: Connection, tenant: str, store: str, customer: str,
                     kinds: Optional[list[FactKind]]) -> list[str]:
        """Remove ``customer``'s facts of ``kinds`` (None: all) in ``tenant`` and ``store`` on
        ``conn``; the kinds removed."""
        where = [memory_facts.c.tenant == tenant, memory_facts.c.store == store, memory_facts.c.customer == customer]
        if kinds is not None:
            where.append(memory_facts.c.kind.in_([k.value for k in kinds]))
        removed = conn.execute(sa.select(memory_facts.c.kind).where(*where)).scalars().all()
        conn.execute(sa.delete(memory_facts).where(*where))
        return sorted(removed)

    def remember_on(self, conn: Connection, tenant: str, store: str, customer: str, fact: MemoryFact) -> MemoryFact:
        """``remember`` on ``conn`` (inside ``apply_once``'s transaction)."""
        return _remember(conn, tenant, store, customer, fact)

    def purge_expired(self, now: datetime) -> int:
        """Remove the facts expired at ``now``, and ledger rows older than ``LEDGER_DAYS``
        (retention); how many facts."""
        with self._engine.begin() as conn:
            conn.execute(sa.delete(memory_writes).where(memory_writes.c.at <= now - timedelta(days=LEDGER_DAYS)))
            return conn.execute(sa.delete(memory_facts).where(memory_facts.c.expires_at <= now)).rowcount

    def dispose(self) -> None:
        """Close the connections."""
        self._engine.dispose()
