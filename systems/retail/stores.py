"""Stores: isolated copies of the τ-bench data in one database.

A template store (:data:`SEED_STORE`) holds the packaged data once; every other store
is copied from it with ``INSERT .. SELECT``. A store can be exported in the benchmark's
JSON shape and hashed as the benchmark grades runs.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from systems.retail import load_data
from systems.retail.engine import Database
from systems.retail.hashing import DocumentHasher
from systems.retail.rows import Section
from systems.retail.schema import STORE_TABLES, Base
from systems.retail.tables import TABLES

SEED_STORE = "__seed__"
"""Template store holding the packaged data once; task stores are copied from it."""

_SEED_ORDER = (Section.USERS, Section.ORDERS, Section.PRODUCTS)
"""Products last: their presence is what marks a store as complete."""


class StoreAdmin(Database):
    """Creating, seeding, dropping, exporting and hashing stores."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self._template_ready = False
        self._hasher = DocumentHasher()

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
                for section in _SEED_ORDER:
                    spec = TABLES[section]
                    docs = data[section.value].items()
                    conn.execute(spec.table.insert(), [spec.row(SEED_STORE, k, i, d) for i, (k, d) in enumerate(docs)])
        self._template_ready = True

    def seed_store(self, store: str, *, replace: bool = False) -> bool:
        """Load the packaged τ-bench data into ``store``.

        Returns True if seeded, False if the store already existed and ``replace`` is
        False (then nothing changes, so a retried seeding activity is harmless). With
        ``replace=True`` every row of the store (data, ledger, outbox, tickets) is
        deleted first. Copies rows from the template store with INSERT .. SELECT.
        Raises ``ValueError`` for the reserved name :data:`SEED_STORE`.
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
            for section in _SEED_ORDER:
                table = TABLES[section].table
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

    def export(self, store: str) -> dict[str, dict[str, Any]]:
        """The store's data as ``{"orders", "products", "users"}`` dicts in the
        benchmark's JSON shape and file order. Raises :class:`UnknownStoreError`."""
        with self._tx(write=False) as conn:
            self._require(conn, store)
            out: dict[str, dict[str, Any]] = {}
            for section, spec in TABLES.items():
                table = spec.table
                query = sa.select(table.c[spec.key], table.c.doc).where(table.c.store == store)
                out[section.value] = {row[0]: row[1] for row in conn.execute(query.order_by(table.c.position))}
        return out

    def hash(self, store: str) -> str:
        """The benchmark's data hash of the store (SHA-256 hex, see
        :func:`~systems.retail.hashing.data_hash`), computed from the stored JSON text
        with a per-document memo (same result). Raises :class:`UnknownStoreError`."""
        with self._tx(write=False) as conn:
            self._require(conn, store)
            sections: dict[str, list[tuple[str, str]]] = {}
            for section, spec in TABLES.items():
                table = spec.table
                raw = sa.cast(table.c.doc, sa.Text)  # the stored JSON text, on SQLite and PostgreSQL
                query = sa.select(table.c[spec.key], raw).where(table.c.store == store)
                sections[section.value] = [(row[0], row[1]) for row in conn.execute(query)]
        return self._hasher.hash(sections)
