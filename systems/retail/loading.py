"""Loading the rows a tool declared, and saving the ones a write changed.

The backend never hands a tool the whole database: :func:`load_for_tool` runs the
tool's declaration (:mod:`systems.retail.rows`), ``locks`` first with ``SELECT .. FOR
UPDATE`` in their order, then ``loads`` read-only, and assembles the ``data`` dict the
pure function runs on. With a customer scope every section that has an owner column
(orders) is filtered to that customer's rows, so another customer's order is
indistinguishable from a missing one.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from systems.retail.rows import RowSet, Section, Selection
from systems.retail.tables import TABLES
from systems.retail.tools.registry import Data, ToolSpec


class LoadedRows:
    """The documents loaded for one call: per section, key -> (position, doc), plus
    which rows are locked. The first load of a row wins (a locked row stays the one the
    tool sees and the one saved)."""

    def __init__(self) -> None:
        self._rows: dict[Section, dict[str, tuple[int, dict[str, Any]]]] = {s: {} for s in TABLES}
        self._data: Data | None = None
        self.locked: set[tuple[Section, str]] = set()

    def add(self, section: Section, key: str, position: int, doc: dict[str, Any], locked: bool) -> None:
        """Record a loaded row (ignored if the row is already there)."""
        if self._data is not None:
            raise RuntimeError("rows cannot be added once data() was handed out")
        if key not in self._rows[section]:
            self._rows[section][key] = (position, doc)
            if locked:
                self.locked.add((section, key))

    def docs(self) -> Mapping[Section, Mapping[str, dict[str, Any]]]:
        """The documents loaded so far, per section, by key."""
        return {s: {k: doc for k, (_, doc) in rows.items()} for s, rows in self._rows.items()}

    def data(self) -> Data:
        """``{"orders", "products", "users"}`` with each section's documents in data-file
        order (by position), as the pure tools expect; the same dict on every call. The
        documents are the loaded objects themselves: a tool's changes show in :meth:`changed`."""
        if self._data is None:
            self._data = {
                s.value: {k: doc for k, (_, doc) in sorted(rows.items(), key=lambda kv: kv[1][0])}
                for s, rows in self._rows.items()
            }
        return self._data

    def snapshot(self) -> dict[tuple[Section, str], str]:
        """``json.dumps`` of every loaded document, to compare against after the tool ran."""
        return {(s, k): json.dumps(doc) for s, rows in self._rows.items() for k, (_, doc) in rows.items()}

    def changed(self, before: dict[tuple[Section, str], str]) -> list[tuple[Section, str, dict[str, Any]]]:
        """``(section, key, doc)`` of every document that differs from ``before``.

        Raises ``RuntimeError`` if a changed document was not locked (the tool changed a
        row its declaration did not lock) or if the tool added or removed documents in
        :meth:`data`: bugs in a tool or its declaration, so nothing is saved.
        """
        data = self.data()
        for section, rows in self._rows.items():
            if data[section.value].keys() != rows.keys():
                raise RuntimeError(f"a tool added or removed {section.value} rows; tools only change documents")
        changed = []
        for (section, key), text in before.items():
            doc = data[section.value][key]  # the tool may have replaced the dict itself
            if json.dumps(doc) != text:
                if (section, key) not in self.locked:
                    raise RuntimeError(f"a tool changed {section.value} row {key!r} it did not lock")
                changed.append((section, key, doc))
        return changed


def _query(store: str, selection: Selection, scope_user_id: str | None, lock: bool) -> sa.Select | None:
    spec = TABLES[selection.section]
    table = spec.table
    key = table.c[spec.key]
    # No stored id or lookup value holds a NUL (PostgreSQL text cannot): such a value matches
    # nothing, on every database, instead of failing the query.
    keys = None if selection.keys is None else {k for k in selection.keys if _storable(k)}
    if (keys is not None and not keys) or not all(_storable(value) for _, value in selection.columns):
        return None  # nothing to load
    query = sa.select(key, table.c.position, table.c.doc).where(table.c.store == store)
    if keys is not None and len(keys) == 1:
        query = query.where(key == next(iter(keys)))  # the common case; no expanding IN
    elif keys is not None:
        query = query.where(key.in_(sorted(keys)))
    for column, value in selection.columns:
        query = query.where(table.c[column] == value)
    if scope_user_id is not None and spec.owner is not None:
        query = query.where(table.c[spec.owner] == scope_user_id)
    query = query.order_by(table.c.position)
    return query.with_for_update() if lock else query


def _storable(value: Any) -> bool:
    return not (isinstance(value, str) and "\x00" in value)


def load_rows(conn: Connection, store: str, declared: RowSet, kwargs: Mapping[str, Any], *, lock: bool,
              scope_user_id: str | None, into: LoadedRows) -> None:
    """Run the steps of ``declared`` in order, adding their rows to ``into`` (locked with
    ``FOR UPDATE`` if ``lock``; on SQLite the writer's ``BEGIN IMMEDIATE`` already holds
    the database). ``scope_user_id`` hides rows another customer owns."""
    for step in declared.steps:
        selection = step.select(kwargs, into.docs())
        query = _query(store, selection, scope_user_id, lock)
        if query is None:
            continue
        for key, position, doc in conn.execute(query):
            into.add(selection.section, key, position, doc, locked=lock)


def load_for_tool(conn: Connection, store: str, spec: ToolSpec, kwargs: Mapping[str, Any],
                  scope_user_id: str | None = None) -> LoadedRows:
    """The rows ``spec`` declares for a call with ``kwargs``: its ``locks`` (locked, in
    order), then its ``loads``."""
    loaded = LoadedRows()
    load_rows(conn, store, spec.locks, kwargs, lock=True, scope_user_id=scope_user_id, into=loaded)
    load_rows(conn, store, spec.loads, kwargs, lock=False, scope_user_id=scope_user_id, into=loaded)
    return loaded


def save_changed(conn: Connection, store: str, loaded: LoadedRows, before: dict[tuple[Section, str], str]) -> None:
    """Write back every locked document that changed since ``before`` (its ``doc`` and
    derived lookup columns). Raises ``RuntimeError`` for a changed unlocked row."""
    for section, key, doc in loaded.changed(before):
        spec = TABLES[section]
        table = spec.table
        where = sa.and_(table.c.store == store, table.c[spec.key] == key)
        conn.execute(table.update().where(where).values(doc=doc, **spec.derived(doc)))
