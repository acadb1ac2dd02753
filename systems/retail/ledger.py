"""The write path: a write tool applied exactly once per idempotency key.

A write and its ledger row commit in one transaction, so a retried call (same key)
gets the recorded result instead of applying twice, also when two workers race.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from systems.retail.engine import Database
from systems.retail.errors import IdempotencyKeyConflict, InvalidData
from systems.retail.loading import load_for_tool, save_changed
from systems.retail.outcome import WriteOutcome, is_refusal
from systems.retail.schema import LedgerEntry
from systems.retail.tools import Data, ToolSpec, run_tool, tool_spec

Guard = Callable[[Data], "str | None"]
"""A caller's precondition: sees the documents a write will run on (inside its
transaction, locked) and returns an ``"Error: ..."`` result to refuse, or None."""

_ledger = LedgerEntry.__table__


class _LostRace(Exception):
    """Another transaction recorded the same key first."""


def args_digest(kwargs: dict[str, Any]) -> str:
    """SHA-256 hex of the canonical JSON (sorted keys, no spaces) of tool kwargs."""
    canonical = json.dumps(kwargs, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _call_digest(kwargs: dict[str, Any], scope_user_id: str | None) -> str:
    # An unscoped write keeps the plain args digest; a scoped one also commits to its
    # scope, so replaying its key under another customer is a conflict, not a replay.
    if scope_user_id is None:
        return args_digest(kwargs)
    return args_digest({"arguments": kwargs, "scope_user_id": scope_user_id})


def _require_clean(value: Any) -> None:
    # PostgreSQL cannot store NUL in text, and no field of an order or a user is meant to
    # hold control characters: refused as what it is, never retried, never half-written
    if isinstance(value, str):
        if any((ord(c) < 32 and c not in "\t\n\r") or 127 <= ord(c) < 160 for c in value):
            raise InvalidData("a text argument holds a control character")
    elif isinstance(value, dict):
        for item in value.values():
            _require_clean(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _require_clean(item)


class Ledger(Database):
    """Idempotent writes and the ledger that records them."""

    def write(self, store: str, tool: str, kwargs: dict[str, Any], idempotency_key: str,
              guard: Guard | None = None, *, scope_user_id: str | None = None) -> WriteOutcome:
        """Apply a write tool to ``store`` exactly once per ``idempotency_key``.

        In one transaction: return the ledger's recorded result if the key is known
        (``replayed=True``); else lock and load the rows the tool declares, run it,
        save the changed docs (only if the result is not an error) and record the
        result in the ledger. Error results are recorded too, so a retry returns the
        same error. When two callers race with one key, one applies and the other
        gets its recorded result. ``transfer_to_human_agents`` only records
        ``"Transfer successful"``.

        ``guard`` (optional) sees the locked documents the tool will touch, inside the same
        transaction, and returns an ``"Error: ..."`` result to refuse the write: a caller's
        precondition checked atomically with the effect, so a concurrent write to the same
        order cannot slip in between a check and the write.

        ``scope_user_id`` (optional): rows owned by another customer are invisible to
        the tool (another customer's order is "not found"); the scope is part of what
        the key records.

        Raises :class:`InvalidData` for a control character in a text argument (tab, line
        feed and carriage return are text), :class:`UnknownToolError`, ``ValueError`` for a READ tool,
        :class:`UnknownStoreError`, :class:`IdempotencyKeyConflict` if the key was
        recorded for a different tool or arguments.
        """
        spec = tool_spec(tool)
        if spec.is_read:
            raise ValueError(f"{tool} is a read; use read()")
        _require_clean(kwargs)
        digest = _call_digest(kwargs, scope_user_id)
        try:
            outcome = self._apply(store, spec, kwargs, idempotency_key, digest, guard, scope_user_id)
        except (_LostRace, IntegrityError):
            with self._tx(write=False) as conn:
                outcome = self._recorded(conn, store, tool, idempotency_key, digest)
            if outcome is None:  # an IntegrityError that was not about the key
                raise
        return outcome

    def recorded(self, store: str, tool: str, kwargs: dict[str, Any], idempotency_key: str) -> WriteOutcome | None:
        """The outcome recorded for ``idempotency_key`` (``replayed=True``), or None if the
        key is unknown: how a caller looks an outcome up by key before deciding anything.
        Raises :class:`IdempotencyKeyConflict` if the key holds another tool or arguments."""
        with self._tx(write=False) as conn:
            return self._recorded(conn, store, tool, idempotency_key, _call_digest(kwargs, None))

    @staticmethod
    def _recorded(conn: Connection, store: str, tool: str, key: str, digest: str) -> WriteOutcome | None:
        query = sa.select(_ledger.c.tool, _ledger.c.args_digest, _ledger.c.result, _ledger.c.ok)
        row = conn.execute(query.where(_ledger.c.store == store, _ledger.c.idempotency_key == key)).first()
        if row is None:
            return None
        if (row.tool, row.args_digest) != (tool, digest):
            raise IdempotencyKeyConflict(f"key {key!r} was recorded for {row.tool} with other arguments")
        return WriteOutcome(result=row.result, ok=row.ok, replayed=True)

    def _apply(self, store: str, spec: ToolSpec, kwargs: dict[str, Any], key: str, digest: str,
               guard: Guard | None, scope_user_id: str | None) -> WriteOutcome:
        with self._tx(write=True) as conn:
            recorded = self._recorded(conn, store, spec.name, key, digest)
            if recorded is not None:
                return recorded
            self._require(conn, store)
            loaded = load_for_tool(conn, store, spec, kwargs, scope_user_id)
            data = loaded.data()
            before = loaded.snapshot()
            refusal = guard(data) if guard is not None else None
            result = refusal if refusal is not None else run_tool(data, spec.name, kwargs)
            ok = not is_refusal(result)
            if ok:
                save_changed(conn, store, loaded, before)
            entry = {"store": store, "idempotency_key": key, "tool": spec.name, "args_digest": digest}
            if not self._inserted(conn, _ledger, {**entry, "result": result, "ok": ok}):
                # A concurrent caller committed this key while we waited for locks;
                # raising rolls back whatever we applied.
                raise _LostRace()
            return WriteOutcome(result=result, ok=ok, replayed=False)

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
