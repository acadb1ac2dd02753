"""``JournalStore``: the decision log and the transcript in our own SQL store (SQLite or
PostgreSQL; never the system of record).

Writes are upserts keyed by business identity (conversation, turn, sequence number), so a
retried activity, a replayed workflow or a reset re-running a turn never duplicates a row.
The public events (``events`` table, ``workflows.domain.journal``) are written with the
turn's rows: an event whose key is known is left as it was (same id, sequence and time), a
new one takes the conversation's next sequence number. Reads: ``events``, ``decisions`` (each
model call joined with its verdict, filterable by conversation, customer, rule and time), ``export_jsonl``, ``transcript``; retention and erasure:
``erase_conversation(s)``, ``erase_customer``, ``purge``, and the ids they would act on
(``conversations_of_customer``, ``stale_conversations``). The row models are in
``activities.store.records``.
"""

from __future__ import annotations

import contextlib
import json
from datetime import datetime, timezone
from typing import IO, Any, Callable, Iterable, Iterator, Optional

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine

from activities.store.records import DecisionRow, Erased, ModelCallRecord, TranscriptEntry
from activities.store.tables import (
    TABLES,
    create_schema,
    events,
    make_engine,
    model_calls,
    refund_events,
    transcript,
    verdicts,
)
from activities.store.webhooks import enqueue, erase_deliveries
from workflows.domain.journal import EventRecord, PublicEvent, RefundEventsRecord, TurnRecord, assign_sequences, event_id

__all__ = ["DecisionRow", "Erased", "JournalStore", "ModelCallRecord", "TranscriptEntry"]  # the row models re-exported


def _utc(value: datetime) -> datetime:
    # SQLite hands back naive datetimes: they were stored as UTC
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


class JournalStore:
    """The journal at SQLAlchemy ``url`` (tables created if missing, on first use, unless
    ``create`` is False: readers such as the backtest never write). Thread-safe; every method
    is one transaction. Raises ``sqlalchemy.exc.SQLAlchemyError`` when the database fails."""

    def __init__(self, url: str, *, create: bool = True, default_tenant: str = "default") -> None:
        self.engine = make_engine(url)
        self.default_tenant = default_tenant
        """The tenant of a record that names none (``TurnRecord.tenant`` None)."""
        self.on_deliveries: Optional[Callable[[list[tuple[str, str]]], None]] = None
        """Called after a commit that enqueued webhook deliveries, with their (webhook id,
        event id): the worker starts their workflows (``activities.webhooks.starts``). Must
        not raise or block: it runs on the writing thread."""
        self._insert = postgresql.insert if self.engine.dialect.name == "postgresql" else sqlite.insert
        self._create = create
        self._upserts: dict[tuple[str, tuple[str, ...]], Any] = {}
        self._schema_ready = False

    def _ready(self) -> Engine:
        # the schema is made on first use, not here: a worker must start while the journal's
        # database is down (it is an audit record; conversations go on without it), and a
        # failed attempt is simply tried again by the next call
        if not self._schema_ready and self._create:
            create_schema(self.engine)
        self._schema_ready = True
        return self.engine

    def ready(self) -> Engine:
        """The journal's engine, its schema brought to the newest first (once; a failed attempt
        is tried again by the next call): the worker asks at start, to say at once when the
        database cannot be used. Raises ``sqlalchemy.exc.SQLAlchemyError`` (or Alembic's
        ``CommandError``) when the database fails."""
        return self._ready()

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    # --- writes -----------------------------------------------------------------------

    def _upsert(self, conn: Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
        # rows of one table share their columns: one executemany, not a statement each
        if rows:
            conn.execute(self._upsert_statement(table, tuple(rows[0])), rows)

    def _upsert_statement(self, table: sa.Table, columns: tuple[str, ...]) -> Any:
        # one statement per (table, columns), values bound at execution: built and compiled
        # once, where a statement with the values in it was compiled on every call
        found = self._upserts.get((table.name, columns))
        if found is None:
            keys = [c.name for c in table.primary_key.columns]
            stmt = self._insert(table)
            found = stmt.on_conflict_do_update(index_elements=keys,
                                               set_={k: stmt.excluded[k] for k in columns if k not in keys})
            self._upserts[(table.name, columns)] = found
        return found

    def record_model_call(self, record: ModelCallRecord, turn: Optional[TurnRecord] = None) -> int:
        """Upsert the row of model call (conversation, turn, call_seq): a retried or
        re-run call overwrites it. With ``turn`` (the turn this call's reply completes), also
        record it as ``record_turn`` does, in the same transaction; returns ``record_turn``'s
        count of skipped verdicts (0 without ``turn``)."""
        with self._ready().begin() as conn, _enqueued(conn) as enqueued:
            self._upsert(conn, model_calls, [record.model_dump()])
            skipped = self._record_turn(conn, turn) if turn is not None else 0
        self._notify(enqueued)
        return skipped

    def record_turn(self, record: TurnRecord) -> int:
        """Upsert a turn's verdicts and transcript entries; returns how many verdicts named
        no known model call (``call_seq`` None in a turn without recorded calls) and were skipped.
        With ``record.turn`` set, rows of that turn beyond what it made (``model_calls``, the
        last transcript entry) are left over from an earlier run of the turn and removed."""
        with self._ready().begin() as conn, _enqueued(conn) as enqueued:
            skipped = self._record_turn(conn, record)
        self._notify(enqueued)
        return skipped

    def _notify(self, keys: list[tuple[str, str]]) -> None:
        # after the commit: a delivery's workflow must find its row
        if keys and self.on_deliveries is not None:
            self.on_deliveries(keys)

    def _record_turn(self, conn: Connection, record: TurnRecord) -> int:
        skipped = 0
        cid = record.conversation_id
        if record.turn is not None:
            self._trim(conn, record)
        rows = []
        written: dict[int, int] = {}  # turn → the highest call_seq of this record's verdicts so far
        for v in record.verdicts:
            call_seq = v.call_seq
            if call_seq is None:
                # the rows go in together below, so the earlier verdicts of this record count too
                found = [c for c in (self._last_call(conn, cid, v.turn), written.get(v.turn)) if c is not None]
                call_seq = max(found, default=None)
            if call_seq is None:
                skipped += 1
                continue
            written[v.turn] = max(call_seq, written.get(v.turn, call_seq))
            rows.append({"conversation_id": cid, "turn": v.turn, "call_seq": call_seq, "customer_id": record.customer_id,
                         "verdict": v.verdict.value, "rule": v.rule, "reason": v.reason, "outcome": v.outcome,
                         "recorded_at": v.at})
        self._upsert(conn, verdicts, rows)
        self._upsert(conn, transcript, [
            {"conversation_id": cid, "turn": e.turn, "seq": e.seq, "customer_id": record.customer_id,
             "role": e.role.value, "kind": e.kind.value, "text": e.text, "message_id": e.message_id, "at": e.at}
            for e in record.transcript])
        rows = self._add_events(conn, events, record.conversation_id, record.events, customer_id=record.customer_id)
        # the outbox: a delivery row per webhook of the tenant that takes each new event, in the
        # same transaction (activities.store.webhooks); an event already known has its rows already
        conn.info.setdefault(ENQUEUED, []).extend(
            enqueue(conn, record.tenant or self.default_tenant, {"conversation_id": record.conversation_id}, rows))
        return skipped

    def record_refund_events(self, record: RefundEventsRecord) -> None:
        """Add a refund's events (``refund_events``): a key already known keeps its row (same
        id, sequence and time), a new one takes the refund's next sequence number."""
        with self._ready().begin() as conn, _enqueued(conn) as enqueued:
            rows = self._add_events(conn, refund_events, record.refund_id, record.events,
                                    conversation_id=record.conversation_id, customer_id=record.customer_id)
            conn.info.setdefault(ENQUEUED, []).extend(  # the outbox, as for a conversation's events
                enqueue(conn, record.tenant or self.default_tenant, {"refund_id": record.refund_id}, rows))
        self._notify(enqueued)

    @staticmethod
    def _add_events(conn: Connection, table: sa.Table, process_id: str, items: list[EventRecord],
                    **columns: Optional[str]) -> list[dict[str, Any]]:
        # events are never trimmed: a stream may already have sent them. A process's records
        # are written one at a time, in order (``JournalLog.flush``, ``RefundEvents.send``), so
        # reading the highest sequence then inserting after it does not race with itself; a
        # concurrent writer would break the unique key and its activity retries. Returns the
        # rows inserted (the events new to the store)
        if not items:
            return []
        id_column = _process_column(table)
        e = table.c
        known = dict(conn.execute(sa.select(e.event_key, e.sequence).where(
            id_column == process_id)).tuples().all())
        by_key: dict[str, EventRecord] = {}
        for item in items:
            by_key.setdefault(item.key, item)
        rows = [{id_column.name: process_id, "sequence": seq, "event_key": key,
                 "event_id": event_id(process_id, key), **columns, "type": by_key[key].type.value,
                 "data": by_key[key].data, "at": by_key[key].at}
                for key, seq in assign_sequences(known, [i.key for i in items])]
        if rows:
            conn.execute(sa.insert(table), rows)
        return rows

    @staticmethod
    def _last_call(conn: Connection, cid: str, turn: int) -> Optional[int]:
        found = [conn.execute(sa.select(sa.func.max(t.c.call_seq)).where(
            t.c.conversation_id == cid, t.c.turn == turn)).scalar() for t in (model_calls, verdicts)]
        return max((f for f in found if f is not None), default=None)

    @staticmethod
    def _trim(conn: Connection, record: TurnRecord) -> None:
        # one statement per table: each is a round trip, and this runs once per turn
        cid, turn = record.conversation_id, record.turn
        last = max((e.seq for e in record.transcript if e.turn == turn), default=-1)
        m, v, t = model_calls.c, verdicts.c, transcript.c
        conn.execute(sa.delete(model_calls).where(m.conversation_id == cid, m.turn == turn,
                                                  m.call_seq > record.model_calls))
        # turns after this one are from a timeline a reset discarded (records are written in
        # turn order); model calls of the next turn may already be in, so they stay, and are
        # overwritten when the new timeline reaches their turn
        conn.execute(sa.delete(verdicts).where(v.conversation_id == cid, sa.or_(
            v.turn > turn, sa.and_(v.turn == turn, v.call_seq > record.model_calls))))
        conn.execute(sa.delete(transcript).where(t.conversation_id == cid, sa.or_(
            t.turn > turn, sa.and_(t.turn == turn, t.seq > last))))

    # --- reads ------------------------------------------------------------------------

    def decisions(self, conversation_id: Optional[str] = None, customer_id: Optional[str] = None,
                  rule: Optional[str] = None, since: Optional[datetime] = None) -> list[DecisionRow]:
        """Model calls joined with their verdicts, ordered by conversation, turn and call.
        Filters combine with AND: ``customer_id`` the authenticated customer at the call,
        ``rule`` the verdict's policy rule, ``since`` calls recorded at or after it (aware
        datetime; naive is taken as UTC)."""
        v = verdicts.c
        query = sa.select(model_calls, v.verdict, v.rule, v.reason, v.outcome).select_from(
            model_calls.outerjoin(verdicts, sa.and_(
                v.conversation_id == model_calls.c.conversation_id, v.turn == model_calls.c.turn,
                v.call_seq == model_calls.c.call_seq)))
        if conversation_id is not None:
            query = query.where(model_calls.c.conversation_id == conversation_id)
        if customer_id is not None:
            query = query.where(model_calls.c.customer_id == customer_id)
        if rule is not None:
            query = query.where(v.rule == rule)
        if since is not None:
            query = query.where(model_calls.c.recorded_at >= _utc(since))
        query = query.order_by(model_calls.c.conversation_id, model_calls.c.turn, model_calls.c.call_seq)
        with self._ready().connect() as conn:
            rows = [dict(r._mapping) for r in conn.execute(query)]
        return [DecisionRow(**{**r, "recorded_at": _utc(r["recorded_at"])}) for r in rows]

    def export_jsonl(self, file: IO[str], **filters: Any) -> int:
        """Write ``decisions(**filters)`` to ``file`` as JSON Lines (one ``DecisionRow`` per
        line); returns the number of rows."""
        rows = self.decisions(**filters)
        for row in rows:
            file.write(json.dumps(row.model_dump(mode="json"), sort_keys=True) + "\n")
        return len(rows)

    def transcript(self, conversation_id: str) -> list[TranscriptEntry]:
        """Every recorded entry of a conversation in order (turn, then seq); [] if none."""
        t = transcript.c
        query = sa.select(t.conversation_id, t.turn, t.seq, t.role, t.kind, t.text, t.message_id, t.at).where(
            t.conversation_id == conversation_id).order_by(t.turn, t.seq)
        with self._ready().connect() as conn:
            rows = [dict(r._mapping) for r in conn.execute(query)]
        return [TranscriptEntry(**{**r, "at": _utc(r["at"])}) for r in rows]

    def events(self, conversation_id: str, after: int = 0, limit: int = 500) -> list[PublicEvent]:
        """The conversation's events with a sequence above ``after``, in order, at most
        ``limit`` of them; [] when there are none (yet)."""
        return self._events(events, conversation_id, after, limit)

    def refund_events(self, refund_id: str, after: int = 0, limit: int = 500) -> list[PublicEvent]:
        """The refund's events with a sequence above ``after``, in order, at most ``limit``."""
        return self._events(refund_events, refund_id, after, limit)

    def last_sequence(self, process: str, process_id: str) -> int:
        """The highest sequence held for ``process_id`` (``process``: ``conversation`` or
        ``refund``); 0 when none is (none recorded yet, or removed with the rest of it)."""
        table = refund_events if process == "refund" else events
        query = sa.select(sa.func.max(table.c.sequence)).where(_process_column(table) == process_id)
        with self._ready().connect() as conn:
            return conn.execute(query).scalar() or 0

    def _events(self, table: sa.Table, process_id: str, after: int, limit: int) -> list[PublicEvent]:
        e = table.c
        query = sa.select(e.event_id, e.type, e.at, e.sequence, e.data).where(
            _process_column(table) == process_id, e.sequence > after).order_by(e.sequence).limit(limit)
        with self._ready().connect() as conn:
            rows = [dict(r._mapping) for r in conn.execute(query)]
        return [PublicEvent(id=r["event_id"], type=r["type"], timestamp=_utc(r["at"]), sequence=r["sequence"],
                            data=r["data"]) for r in rows]

    def knows(self, conversation_id: str) -> bool:
        """Whether any row (decision log or transcript) of ``conversation_id`` is recorded."""
        with self._ready().connect() as conn:
            return any(conn.execute(sa.select(table.c.conversation_id).where(
                table.c.conversation_id == conversation_id).limit(1)).first() is not None for table in TABLES)

    # --- retention and erasure --------------------------------------------------------

    def _erase(self, conn: Connection, ids: set[str]) -> Erased:
        erased, found = Erased(conversations=0), set()
        for table in TABLES:
            for chunk in _chunks(sorted(ids)):
                found |= set(conn.execute(sa.select(table.c.conversation_id).where(
                    table.c.conversation_id.in_(chunk)).distinct()).scalars())
                count = conn.execute(sa.delete(table).where(table.c.conversation_id.in_(chunk))).rowcount
                setattr(erased, table.name, getattr(erased, table.name) + count)
        for chunk in _chunks(sorted(ids)):  # the events of the refunds these conversations started
            refunds = list(conn.execute(sa.select(refund_events.c.refund_id).where(
                refund_events.c.conversation_id.in_(chunk)).distinct()).scalars())
            erased.refund_events += conn.execute(sa.delete(refund_events).where(
                refund_events.c.conversation_id.in_(chunk))).rowcount
            erase_deliveries(conn, chunk, refunds)  # their events are gone: nothing left to deliver
        erased.conversations = len(found)  # those that had rows: erasing twice erases nothing
        return erased

    def erase_refunds(self, refund_ids: Iterable[str] = (), customer_ids: Iterable[str] = ()) -> int:
        """Remove the events of the refunds ``refund_ids`` and of every refund whose order
        belongs to one of ``customer_ids`` (the journal keeps a refund's events apart from
        conversations': ``erase_conversations`` removes those of the refunds a conversation
        started); returns the rows removed."""
        r, removed = refund_events.c, 0
        with self._ready().begin() as conn:
            for column, values in ((r.refund_id, refund_ids), (r.customer_id, customer_ids)):
                for chunk in _chunks(sorted(set(values))):
                    refunds = list(conn.execute(sa.select(r.refund_id).where(column.in_(chunk)).distinct()).scalars())
                    removed += conn.execute(sa.delete(refund_events).where(column.in_(chunk))).rowcount
                    erase_deliveries(conn, refund_ids=refunds)
        return removed

    def erase_conversation(self, conversation_id: str) -> Erased:
        """Remove every row of a conversation (decision log and transcript)."""
        with self._ready().begin() as conn:
            return self._erase(conn, {conversation_id})

    def erase_conversations(self, conversation_ids: Iterable[str]) -> Erased:
        """Remove every row of the given conversations, in one transaction."""
        with self._ready().begin() as conn:
            return self._erase(conn, set(conversation_ids))

    @staticmethod
    def _of_customer(conn: Connection, customer_id: str) -> set[str]:
        return {cid for table in TABLES for cid in conn.execute(sa.select(table.c.conversation_id).where(
            table.c.customer_id == customer_id).distinct()).scalars()}

    def conversations_of_customer(self, customer_id: str) -> set[str]:
        """Ids of the conversations in which ``customer_id`` was the authenticated customer."""
        with self._ready().connect() as conn:
            return self._of_customer(conn, customer_id)

    def erase_customer(self, customer_id: str) -> Erased:
        """Remove every conversation in which ``customer_id`` was the authenticated customer,
        whole (its turns before authentication hold their personal data too), and the events
        of every refund of their orders."""
        with self._ready().begin() as conn:
            erased = self._erase(conn, self._of_customer(conn, customer_id))
            erased.refund_events += conn.execute(sa.delete(refund_events).where(
                refund_events.c.customer_id == customer_id)).rowcount
            return erased

    @staticmethod
    def _stale(older_than: datetime) -> sa.Select:
        newest = sa.union_all(
            sa.select(model_calls.c.conversation_id.label("cid"), model_calls.c.recorded_at.label("at")),
            sa.select(verdicts.c.conversation_id, verdicts.c.recorded_at),
            sa.select(transcript.c.conversation_id, transcript.c.at),
            sa.select(events.c.conversation_id, events.c.at),
            sa.select(refund_events.c.conversation_id, refund_events.c.at).where(
                refund_events.c.conversation_id.is_not(None)),
        ).subquery()
        return sa.select(newest.c.cid).group_by(newest.c.cid).having(sa.func.max(newest.c.at) < _utc(older_than))

    def stale_refunds(self, older_than: datetime) -> set[str]:
        """Ids of the backend's refunds (started by no conversation) whose newest event is older
        than ``older_than`` (aware datetime; naive is taken as UTC): a conversation's refunds go
        with it."""
        r = refund_events.c
        query = sa.select(r.refund_id).where(r.conversation_id.is_(None)).group_by(r.refund_id).having(
            sa.func.max(r.at) < _utc(older_than))
        with self._ready().connect() as conn:
            return set(conn.execute(query).scalars())

    def stale_conversations(self, older_than: datetime) -> set[str]:
        """Ids of the conversations whose newest row is older than ``older_than`` (aware
        datetime; naive is taken as UTC)."""
        with self._ready().connect() as conn:
            return set(conn.execute(self._stale(older_than)).scalars())

    def purge(self, older_than: datetime, keep: Iterable[str] = ()) -> Erased:
        """Remove whole conversations whose newest row is older than ``older_than`` (aware
        datetime; naive is taken as UTC), except the ids in ``keep`` (still running):
        retention is per conversation, never half of one."""
        with self._ready().begin() as conn:
            return self._erase(conn, set(conn.execute(self._stale(older_than)).scalars()) - set(keep))


ENQUEUED = "statekeeper.webhook_deliveries"
"""``Connection.info`` key of the deliveries a transaction enqueued (``_enqueued``)."""


@contextlib.contextmanager
def _enqueued(conn: Connection) -> Iterator[list[tuple[str, str]]]:
    """The (webhook id, event id) of the deliveries enqueued on ``conn`` within the block, in the
    list yielded once the block ends; forgotten either way (a pooled connection keeps its ``info``)."""
    found: list[tuple[str, str]] = []
    conn.info.pop(ENQUEUED, None)
    try:
        yield found
    finally:
        found.extend(conn.info.pop(ENQUEUED, []))


def _process_column(table: sa.Table) -> sa.Column:
    # the process an events table is keyed by: a refund's, or a conversation's
    return table.c.refund_id if table is refund_events else table.c.conversation_id


def _chunks(ids: list[str], size: int = 500) -> list[list[str]]:
    # bounded IN lists: SQLite limits bound parameters per statement
    return [ids[i:i + size] for i in range(0, len(ids), size)]
