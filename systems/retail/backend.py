"""The retail system of record: τ-bench retail data in SQL, written exactly once per key.

:class:`RetailBackend` keeps many isolated copies ("stores") of the benchmark data in
one database and runs the pure tools of :mod:`systems.retail.tools` against the
rows a call touches. A write and its ledger row commit in one transaction, so a
retried activity (same idempotency key) gets the recorded result instead of applying
twice, also when two workers race. Methods are synchronous; the activities layer
wraps them in ``asyncio.to_thread``.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from systems.retail import load_data
from systems.retail.hashing import DocumentHasher
from systems.retail.schema import (
    STORE_TABLES,
    Base,
    LedgerEntry,
    Order,
    OutboxMessage,
    Product,
    Ticket,
    User,
)
from systems.retail.tools import TOOL_CLASS, TOOLS, ToolClass, UnknownToolError, run_tool

SEED_STORE = "__seed__"
"""Template store holding the packaged data once; task stores are copied from it."""

_BEGIN = "statekeeper_sqlite_begin"
_users, _orders, _products = User.__table__, Order.__table__, Product.__table__
_ledger, _outbox, _tickets = LedgerEntry.__table__, OutboxMessage.__table__, Ticket.__table__
_ORDER_TOOLS = frozenset(
    {
        "cancel_pending_order",
        "modify_pending_order_address",
        "modify_pending_order_items",
        "modify_pending_order_payment",
        "return_delivered_order_items",
        "exchange_delivered_order_items",
    }
)


class WriteOutcome(BaseModel):
    """Result of :meth:`RetailBackend.write`.

    ``result``: the tool's result string; ``ok``: False when it starts with "Error";
    ``replayed``: True when the key was already in the ledger and the recorded result
    was returned without applying anything.
    """

    model_config = ConfigDict(frozen=True)
    result: str
    ok: bool
    replayed: bool


class UnknownStoreError(KeyError):
    """The store has not been seeded (or was dropped)."""


class IdempotencyKeyConflict(ValueError):
    """The key was already used for a different tool or different arguments."""


class _LostRace(Exception):
    """Another transaction recorded the same key first."""


def args_digest(kwargs: dict[str, Any]) -> str:
    """SHA-256 hex of the canonical JSON (sorted keys, no spaces) of tool kwargs."""
    canonical = json.dumps(kwargs, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------- engines


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # pysqlite's own implicit BEGIN is disabled so _sqlite_on_begin decides the mode.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _sqlite_on_begin(conn: Connection) -> None:
    # Writers use BEGIN IMMEDIATE: they take the write lock up front (waiting up to
    # busy_timeout), so read-check-write sequences serialize instead of failing with
    # SQLITE_BUSY on lock upgrade.
    conn.exec_driver_sql(f"BEGIN {conn.get_execution_options().get(_BEGIN, 'DEFERRED')}")


def _install_sqlite_events(engine: Engine) -> None:
    if not event.contains(engine, "begin", _sqlite_on_begin):
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
        engine.dispose()  # pooled connections predate the connect hook


def make_engine(url: str, **kwargs: Any) -> Engine:
    """Engine for the system of record.

    SQLite (use a file, not ``:memory:``): WAL journal, 30 s busy timeout,
    ``check_same_thread=False``, explicit ``BEGIN``/``BEGIN IMMEDIATE``.
    PostgreSQL: a pool of 10 (+10 overflow) with pre-ping. Extra ``kwargs`` go to
    :func:`sqlalchemy.create_engine`.
    """
    if sa.make_url(url).get_backend_name() == "sqlite":
        connect_args = {"check_same_thread": False, "timeout": 30}
        engine = sa.create_engine(url, connect_args=connect_args, **kwargs)
        _install_sqlite_events(engine)
        return engine
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 10)
    kwargs.setdefault("pool_pre_ping", True)
    return sa.create_engine(url, **kwargs)


# ---------------------------------------------------------------- row helpers


def _user_row(store: str, user_id: str, position: int, doc: dict) -> dict[str, Any]:
    return {"store": store, "user_id": user_id, "position": position, **_user_keys(doc), "doc": doc}


def _user_keys(doc: dict) -> dict[str, Any]:
    # Python's lower(), not SQL's, so lookups agree with the benchmark on any Unicode.
    name = doc["name"]
    return {
        "email_lc": str(doc["email"]).lower(),
        "first_lc": str(name["first_name"]).lower(),
        "last_lc": str(name["last_name"]).lower(),
        "zip": str(doc["address"]["zip"]),
    }


def _order_row(store: str, order_id: str, position: int, doc: dict) -> dict[str, Any]:
    return {
        "store": store,
        "order_id": order_id,
        "position": position,
        "user_id": doc["user_id"],
        "status": doc["status"],
        "doc": doc,
    }


def _str_arg(kwargs: dict[str, Any], name: str) -> str | None:
    value = kwargs.get(name)
    return value if isinstance(value, str) else None


class RetailBackend:
    """Multi-tenant system of record for the τ-bench retail domain.

    ``engine`` should come from :func:`make_engine` (SQLite or PostgreSQL).
    ``after_commit_hook``, if set, is called as ``hook(store, idempotency_key, outcome)``
    right after a write's transaction commits (not on a replay) and before
    :meth:`write` returns - the point where a crash leaves an applied write whose
    caller never saw the result.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sqlite = engine.dialect.name == "sqlite"
        self._pg = engine.dialect.name == "postgresql"
        self._insert = sqlite.insert if self._sqlite else postgresql.insert
        self._template_ready = False
        self._hasher = DocumentHasher()
        self.after_commit_hook: Callable[[str, str, WriteOutcome], None] | None = None
        if self._sqlite:
            _install_sqlite_events(engine)

    # ------------------------------------------------------------ plumbing

    @contextmanager
    def _tx(self, *, write: bool) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            if write and self._sqlite:
                conn = conn.execution_options(**{_BEGIN: "IMMEDIATE"})
            with conn.begin():
                yield conn

    def _lock_store(self, conn: Connection, store: str) -> None:
        # Serializes seeding/dropping of one store across PostgreSQL sessions;
        # SQLite's BEGIN IMMEDIATE already serializes all writers.
        if self._pg:
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(sa.func.hashtext(store))))
    @staticmethod
    def _exists(conn: Connection, store: str) -> bool:
        query = sa.select(_products.c.product_id).where(_products.c.store == store).limit(1)
        return conn.execute(query).first() is not None

    def _require(self, conn: Connection, store: str) -> None:
        if not self._exists(conn, store):
            raise UnknownStoreError(store)

    # ------------------------------------------------------------ stores

    def create_schema(self) -> None:
        """Create the tables if missing (idempotent; the tables are shared by all stores)."""
        with self._tx(write=True) as conn:
            self._lock_store(conn, "statekeeper schema")  # concurrent CREATE TABLEs collide on PG
            Base.metadata.create_all(conn, checkfirst=True)

    def _ensure_template(self) -> None:
        if self._template_ready:
            return
        with self._tx(write=True) as conn:
            self._lock_store(conn, SEED_STORE)
            if not self._exists(conn, SEED_STORE):
                data = load_data()
                conn.execute(
                    _users.insert(),
                    [_user_row(SEED_STORE, k, i, d) for i, (k, d) in enumerate(data["users"].items())],
                )
                conn.execute(
                    _orders.insert(),
                    [_order_row(SEED_STORE, k, i, d) for i, (k, d) in enumerate(data["orders"].items())],
                )
                # Products last: their presence is what marks a store as complete.
                conn.execute(
                    _products.insert(),
                    [
                        {"store": SEED_STORE, "product_id": k, "position": i, "doc": d}
                        for i, (k, d) in enumerate(data["products"].items())
                    ],
                )
        self._template_ready = True

    def seed_store(self, store: str, *, replace: bool = False) -> bool:
        """Load the packaged τ-bench data into ``store``.

        Returns True if seeded, False if the store already existed and ``replace`` is
        False (then nothing changes, so a retried seeding activity is harmless). With
        ``replace=True`` every row of the store (data, ledger, outbox, tickets) is
        deleted first. Copies rows from the template store with INSERT .. SELECT.
        """
        if store == SEED_STORE:
            raise ValueError(f"{SEED_STORE!r} is reserved for the template")
        self._ensure_template()
        with self._tx(write=True) as conn:
            self._lock_store(conn, store)
            if self._exists(conn, store):
                if not replace:
                    return False
                self._delete(conn, store)
            for table in (_users, _orders, _products):
                cols = [c.name for c in table.columns]
                source = [sa.literal(store, sa.String) if c == "store" else table.c[c] for c in cols]
                select = sa.select(*source).where(table.c.store == SEED_STORE)
                conn.execute(table.insert().from_select(cols, select))
        return True

    def store_exists(self, store: str) -> bool:
        """True if ``store`` has been seeded and not dropped."""
        with self._tx(write=False) as conn:
            return self._exists(conn, store)

    @staticmethod
    def _delete(conn: Connection, store: str) -> None:
        for table in STORE_TABLES:
            conn.execute(table.delete().where(table.c.store == store))

    def drop_store(self, store: str) -> None:
        """Delete every row of ``store`` in every table (no-op if absent)."""
        with self._tx(write=True) as conn:
            self._lock_store(conn, store)
            self._delete(conn, store)
        if store == SEED_STORE:
            self._template_ready = False

    # ------------------------------------------------------------ loading docs

    def _load_users(self, conn: Connection, store: str, where: Any, lock: bool = False) -> dict[str, dict]:
        query = sa.select(_users.c.user_id, _users.c.doc).where(_users.c.store == store, where)
        query = query.order_by(_users.c.position)
        if lock:
            query = query.with_for_update()
        return {row.user_id: row.doc for row in conn.execute(query)}

    def _load_order(self, conn: Connection, store: str, order_id: str | None, lock: bool) -> dict[str, dict]:
        if order_id is None:
            return {}
        query = sa.select(_orders.c.doc).where(_orders.c.store == store, _orders.c.order_id == order_id)
        if lock:
            query = query.with_for_update()
        doc = conn.execute(query).scalar_one_or_none()
        return {} if doc is None else {order_id: doc}

    def _load_products(self, conn: Connection, store: str, product_ids: list[str] | None) -> dict[str, dict]:
        query = sa.select(_products.c.product_id, _products.c.doc).where(_products.c.store == store)
        if product_ids is not None:
            query = query.where(_products.c.product_id.in_(product_ids))
        return {row.product_id: row.doc for row in conn.execute(query.order_by(_products.c.position))}

    def _read_data(self, conn: Connection, store: str, tool: str, kwargs: dict[str, Any]) -> dict[str, dict]:
        # Only the rows the tool can look at; the pure tool then decides exactly as
        # the benchmark would over the full data.
        data: dict[str, dict] = {"orders": {}, "products": {}, "users": {}}
        if tool == "find_user_id_by_email":
            email = _str_arg(kwargs, "email")
            where = _users.c.email_lc == email.lower() if email is not None else sa.true()
            data["users"] = self._load_users(conn, store, where)
        elif tool == "find_user_id_by_name_zip":
            first, last = _str_arg(kwargs, "first_name"), _str_arg(kwargs, "last_name")
            where = (
                sa.and_(_users.c.first_lc == first.lower(), _users.c.last_lc == last.lower())
                if first is not None and last is not None
                else sa.true()
            )
            data["users"] = self._load_users(conn, store, where)
        elif tool == "get_user_details":
            data["users"] = self._load_users(conn, store, _users.c.user_id == _str_arg(kwargs, "user_id"))
        elif tool == "get_order_details":
            data["orders"] = self._load_order(conn, store, _str_arg(kwargs, "order_id"), lock=False)
        elif tool == "get_product_details":
            product_id = _str_arg(kwargs, "product_id")
            data["products"] = self._load_products(conn, store, [product_id] if product_id else [])
        elif tool == "list_all_product_types":
            data["products"] = self._load_products(conn, store, None)
        return data

    def _write_data(self, conn: Connection, store: str, tool: str, kwargs: dict[str, Any]) -> dict[str, dict]:
        # Rows are locked order first, then its user: every write takes them in that
        # order, so concurrent writes cannot deadlock.
        data: dict[str, dict] = {"orders": {}, "products": {}, "users": {}}
        if tool == "modify_user_address":
            user_id = _str_arg(kwargs, "user_id")
            data["users"] = self._load_users(conn, store, _users.c.user_id == user_id, lock=True)
        elif tool in _ORDER_TOOLS:
            data["orders"] = self._load_order(conn, store, _str_arg(kwargs, "order_id"), lock=True)
            for order in data["orders"].values():
                where = _users.c.user_id == order["user_id"]
                data["users"] = self._load_users(conn, store, where, lock=True)
                if tool in ("modify_pending_order_items", "exchange_delivered_order_items"):
                    product_ids = sorted({item["product_id"] for item in order["items"]})
                    data["products"] = self._load_products(conn, store, product_ids)
        return data

    # ------------------------------------------------------------ tools

    def read(self, store: str, tool: str, kwargs: dict[str, Any]) -> str:
        """Run a READ tool against ``store``; returns the benchmark's result string.

        Raises :class:`UnknownToolError` for an unknown tool, ``ValueError`` for a
        write tool, :class:`UnknownStoreError` for an unseeded store.
        """
        if tool not in TOOLS:
            raise UnknownToolError(tool)
        if TOOL_CLASS[tool] is not ToolClass.READ:
            raise ValueError(f"{tool} is a write; use write()")
        with self._tx(write=False) as conn:
            self._require(conn, store)
            data = self._read_data(conn, store, tool, kwargs)
        return run_tool(data, tool, kwargs)

    def write(self, store: str, tool: str, kwargs: dict[str, Any], idempotency_key: str,
              guard: Callable[[dict[str, dict]], str | None] | None = None) -> WriteOutcome:
        """Apply a write tool to ``store`` exactly once per ``idempotency_key``.

        In one transaction: return the ledger's recorded result if the key is known
        (``replayed=True``); else lock and load the rows the tool touches, run it,
        save the changed docs (only if the result is not an error) and record the
        result in the ledger. Error results are recorded too, so a retry returns the
        same error. When two callers race with one key, one applies and the other
        gets its recorded result. ``transfer_to_human_agents`` only records
        ``"Transfer successful"``.

        ``guard`` (optional) sees the locked documents the tool will touch, inside the same
        transaction, and returns an ``"Error: ..."`` result to refuse the write: a caller's
        precondition checked atomically with the effect, so a concurrent write to the same
        order cannot slip in between a check and the write.

        Raises :class:`UnknownToolError`, ``ValueError`` for a READ tool,
        :class:`UnknownStoreError`, :class:`IdempotencyKeyConflict` if the key was
        recorded for a different tool or arguments.
        """
        if tool not in TOOLS:
            raise UnknownToolError(tool)
        if TOOL_CLASS[tool] is ToolClass.READ:
            raise ValueError(f"{tool} is a read; use read()")
        digest = args_digest(kwargs)
        try:
            outcome = self._apply(store, tool, kwargs, idempotency_key, digest, guard)
        except (_LostRace, IntegrityError):
            with self._tx(write=False) as conn:
                outcome = self._recorded(conn, store, tool, idempotency_key, digest)
            if outcome is None:  # an IntegrityError that was not about the key
                raise
        if not outcome.replayed and self.after_commit_hook is not None:
            self.after_commit_hook(store, idempotency_key, outcome)
        return outcome

    @staticmethod
    def _recorded(conn: Connection, store: str, tool: str, key: str, digest: str) -> WriteOutcome | None:
        query = sa.select(_ledger.c.tool, _ledger.c.args_digest, _ledger.c.result, _ledger.c.ok)
        row = conn.execute(query.where(_ledger.c.store == store, _ledger.c.idempotency_key == key)).first()
        if row is None:
            return None
        if (row.tool, row.args_digest) != (tool, digest):
            raise IdempotencyKeyConflict(f"key {key!r} was recorded for {row.tool} with other arguments")
        return WriteOutcome(result=row.result, ok=row.ok, replayed=True)

    def _apply(self, store: str, tool: str, kwargs: dict[str, Any], key: str, digest: str,
               guard: Callable[[dict[str, dict]], str | None] | None) -> WriteOutcome:
        with self._tx(write=True) as conn:
            recorded = self._recorded(conn, store, tool, key, digest)
            if recorded is not None:
                return recorded
            self._require(conn, store)
            data = self._write_data(conn, store, tool, kwargs)
            before = {(s, k): json.dumps(d) for s, docs in data.items() for k, d in docs.items()}
            refusal = guard(data) if guard is not None else None
            result = refusal if refusal is not None else run_tool(data, tool, kwargs)
            ok = not result.startswith("Error")
            if ok:
                self._save(conn, store, data, before)
            entry = {"store": store, "idempotency_key": key, "tool": tool, "args_digest": digest}
            if not self._inserted(conn, _ledger, {**entry, "result": result, "ok": ok}):
                # A concurrent caller committed this key while we waited for locks;
                # raising rolls back whatever we applied.
                raise _LostRace()
            return WriteOutcome(result=result, ok=ok, replayed=False)

    @staticmethod
    def _save(conn: Connection, store: str, data: dict[str, dict], before: dict[tuple[str, str], str]) -> None:
        for order_id, doc in data["orders"].items():
            if json.dumps(doc) != before[("orders", order_id)]:
                where = sa.and_(_orders.c.store == store, _orders.c.order_id == order_id)
                values = {"doc": doc, "status": doc["status"], "user_id": doc["user_id"]}
                conn.execute(_orders.update().where(where).values(**values))
        for user_id, doc in data["users"].items():
            if json.dumps(doc) != before[("users", user_id)]:
                where = sa.and_(_users.c.store == store, _users.c.user_id == user_id)
                conn.execute(_users.update().where(where).values(doc=doc, **_user_keys(doc)))
        # No retail tool changes products; they are loaded read-only.

    # ------------------------------------------------------------ side channels

    def _inserted(self, conn: Connection, table: sa.Table, row: dict[str, Any]) -> bool:
        # RETURNING rather than rowcount: psycopg reports -1 for ON CONFLICT inserts.
        pk = table.primary_key.columns.values()[-1]
        insert = self._insert(table).values(**row).on_conflict_do_nothing().returning(pk)
        return conn.execute(insert).first() is not None

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

    def _rows(self, table: sa.Table, store: str) -> list[dict[str, Any]]:
        with self._tx(write=False) as conn:
            order = (table.c.created_at, *table.primary_key.columns)
            query = sa.select(table).where(table.c.store == store).order_by(*order)
            return [dict(row._mapping) for row in conn.execute(query)]

    def outbox_messages(self, store: str) -> list[dict[str, Any]]:
        """Queued emails of ``store`` (dicts of the outbox columns), oldest first."""
        return self._rows(_outbox, store)

    def tickets(self, store: str) -> list[dict[str, Any]]:
        """Tickets of ``store`` (dicts of the tickets columns), oldest first."""
        return self._rows(_tickets, store)

    def ledger_entries(self, store: str) -> list[dict[str, Any]]:
        """Ledger rows of ``store`` (dicts of the ledger columns), oldest first."""
        return self._rows(_ledger, store)

    def duplicate_writes(self, store: str) -> int:
        """Applied (ok) ledger rows beyond the first per (tool, args_digest): the writes
        the system of record saw applied more than once."""
        counts = (
            sa.select(sa.func.count().label("n"))
            .where(_ledger.c.store == store, _ledger.c.ok.is_(True))
            .group_by(_ledger.c.tool, _ledger.c.args_digest)
            .subquery()
        )
        with self._tx(write=False) as conn:
            return int(conn.execute(sa.select(sa.func.coalesce(sa.func.sum(counts.c.n - 1), 0))).scalar_one())

    # ------------------------------------------------------------ export

    def export(self, store: str) -> dict[str, dict[str, Any]]:
        """The store's data as ``{"orders", "products", "users"}`` dicts in the
        benchmark's JSON shape and file order. Raises :class:`UnknownStoreError`."""
        with self._tx(write=False) as conn:
            self._require(conn, store)
            out: dict[str, dict[str, Any]] = {}
            for name, table in (("orders", _orders), ("products", _products), ("users", _users)):
                key = table.c[f"{name[:-1]}_id"]
                query = sa.select(key, table.c.doc).where(table.c.store == store).order_by(table.c.position)
                out[name] = {row[0]: row[1] for row in conn.execute(query)}
        return out

    def hash(self, store: str) -> str:
        """The benchmark's data hash of the store (see :func:`hashing.data_hash`),
        computed from the stored JSON text with a per-document memo (same result)."""
        with self._tx(write=False) as conn:
            self._require(conn, store)
            sections: dict[str, list[tuple[str, str]]] = {}
            for name, table in (("orders", _orders), ("products", _products), ("users", _users)):
                key = table.c[f"{name[:-1]}_id"]
                raw = sa.cast(table.c.doc, sa.Text)  # the stored JSON text, on SQLite and PostgreSQL
                query = sa.select(key, raw).where(table.c.store == store)
                sections[name] = [(row[0], row[1]) for row in conn.execute(query)]
        return self._hasher.hash(sections)
