"""Engines and transactions of the retail system of record (SQLite or PostgreSQL).

:func:`make_engine` configures either database for concurrent writers;
:class:`Database` is the plumbing the backend's parts share: transactions (writers
take SQLite's write lock up front), per-store advisory locks on PostgreSQL,
insert-once, and the "is this store seeded" check.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Iterator

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine

from systems.retail.errors import UnknownStoreError
from systems.retail.schema import Product

_BEGIN = "statekeeper_sqlite_begin"
TX_DEADLINE: ContextVar["float | None"] = ContextVar("retail_tx_deadline", default=None)
"""The caller's deadline (Unix seconds) for transactions started in this context: set with
:func:`deadline_scope`."""


class DeadlinePassed(Exception):
    """The caller's deadline passed before commit: the transaction was rolled back."""


@contextmanager
def deadline_scope(deadline: "float | None") -> Iterator[None]:
    """Transactions in the block end before ``deadline`` (Unix seconds; None: no bound): on
    PostgreSQL ``statement_timeout`` and ``lock_timeout`` are the time left, and on either
    database a transaction still open at the deadline rolls back (``DeadlinePassed``) instead
    of committing for a caller that has given up."""
    token = TX_DEADLINE.set(deadline)
    try:
        yield
    finally:
        TX_DEADLINE.reset(token)
_products = Product.__table__


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


def private_sqlite_file(url: str) -> None:
    """For a SQLite file URL: create the file 0600 before SQLite does (it would use the
    umask, often 0644); SQLite gives its WAL and journal files the database file's mode. An
    existing file (and its WAL files) with wider permissions is narrowed to 0600: it holds
    customers' personal data. Other URLs: nothing.

    An existing file is never opened here: closing any descriptor of a SQLite file drops the
    POSIX locks every connection of this process holds on it (SQLite then fails with "disk
    I/O error"), so only a file that does not exist yet is created, exclusively."""
    if sa.make_url(url).get_backend_name() != "sqlite":
        return
    database = sa.make_url(url).database
    if not database or database == ":memory:" or str(database).startswith("file:"):
        return
    path = Path(database)
    with suppress(OSError):  # e.g. a missing directory or another owner's file: SQLite says why
        if not path.exists():
            os.close(os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0o600))
    for file in (path, *(path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal"))):
        with suppress(OSError):  # chmod opens no descriptor
            if file.stat().st_mode & 0o077:
                file.chmod(0o600)


def make_engine(url: str, **kwargs: Any) -> Engine:
    """Engine for the system of record.

    SQLite (use a file, not ``:memory:``): WAL journal, 30 s busy timeout,
    ``check_same_thread=False``, explicit ``BEGIN``/``BEGIN IMMEDIATE``.
    PostgreSQL: a pool of 10 (+10 overflow) with pre-ping. Extra ``kwargs`` go to
    :func:`sqlalchemy.create_engine`.
    """
    if sa.make_url(url).get_backend_name() == "sqlite":
        private_sqlite_file(url)
        connect_args = {"check_same_thread": False, "timeout": 30}
        engine = sa.create_engine(url, connect_args=connect_args, **kwargs)
        _install_sqlite_events(engine)
        return engine
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 10)
    kwargs.setdefault("pool_pre_ping", True)
    return sa.create_engine(url, **kwargs)


def for_writing(conn: Connection) -> Connection:
    """``conn`` set to begin its transactions as a writer: on SQLite ``BEGIN IMMEDIATE`` (the
    write lock up front, waiting up to the busy timeout, instead of "database is locked" when
    a read-then-write transaction upgrades its lock under concurrency); other databases: as is."""
    if conn.dialect.name == "sqlite":
        return conn.execution_options(**{_BEGIN: "IMMEDIATE"})
    return conn


class Database:
    """Transactions and shared helpers over ``engine`` (SQLite or PostgreSQL; an engine
    not made by :func:`make_engine` gets the SQLite hooks installed here)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sqlite = engine.dialect.name == "sqlite"
        self._pg = engine.dialect.name == "postgresql"
        self._insert = sqlite.insert if self._sqlite else postgresql.insert
        if self._sqlite:
            _install_sqlite_events(engine)

    @contextmanager
    def _tx(self, *, write: bool) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            if write:
                conn = for_writing(conn)
            deadline = TX_DEADLINE.get()
            with conn.begin():
                if deadline is not None:
                    self._bound(conn, deadline)
                yield conn
                if deadline is not None and time.time() > deadline:
                    raise DeadlinePassed("the caller's deadline passed before commit; rolled back")

    def _bound(self, conn: Connection, deadline: float) -> None:
        left = deadline - time.time()
        if left <= 0:
            raise DeadlinePassed("the caller's deadline passed before the transaction began")
        if self._pg:
            ms = max(1, int(left * 1000))
            conn.exec_driver_sql(f"SET LOCAL statement_timeout = {ms}")
            conn.exec_driver_sql(f"SET LOCAL lock_timeout = {ms}")

    def _lock_store(self, conn: Connection, store: str) -> None:
        # Serializes seeding/dropping of one store across PostgreSQL sessions;
        # SQLite's BEGIN IMMEDIATE already serializes all writers.
        if self._pg:
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(sa.func.hashtext(store))))

    @staticmethod
    def _exists(conn: Connection, store: str) -> bool:
        # Products are written last when a store is seeded: their presence marks it complete.
        query = sa.select(_products.c.product_id).where(_products.c.store == store).limit(1)
        return conn.execute(query).first() is not None

    def _require(self, conn: Connection, store: str) -> None:
        if not self._exists(conn, store):
            raise UnknownStoreError(store)

    def _inserted(self, conn: Connection, table: sa.Table, row: dict[str, Any]) -> bool:
        # RETURNING rather than rowcount: psycopg reports -1 for ON CONFLICT inserts.
        pk = table.primary_key.columns.values()[-1]
        insert = self._insert(table).values(**row).on_conflict_do_nothing().returning(pk)
        return conn.execute(insert).first() is not None

    def _rows(self, table: sa.Table, store: str) -> list[dict[str, Any]]:
        # Every row of the store in ``table`` as a dict of its columns, oldest first.
        with self._tx(write=False) as conn:
            order = (table.c.created_at, *table.primary_key.columns)
            query = sa.select(table).where(table.c.store == store).order_by(*order)
            return [dict(row._mapping) for row in conn.execute(query)]
