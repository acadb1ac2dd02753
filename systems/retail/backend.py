"""The retail system of record: τ-bench retail data in SQL, written exactly once per key.

:class:`RetailBackend` keeps many isolated copies ("stores") of the benchmark data in
one database and runs the pure tools of :mod:`systems.retail.tools` against the rows
each tool declares. Its parts: :mod:`.engine` (engines, transactions), :mod:`.stores`
(seeding, export, hash), :mod:`.ledger` (the idempotent write path),
:mod:`.side_channels` (outbox, tickets), :mod:`.erasure` (forgetting side records),
:mod:`.loading` (rows in, changes out).
Methods are synchronous; callers on an event loop wrap them in ``asyncio.to_thread``.
"""

from __future__ import annotations

from typing import Any

from systems.retail.engine import make_engine
from systems.retail.erasure import RecordErasure
from systems.retail.errors import (
    IdempotencyKeyConflict,
    UnknownStoreError,
    UnknownToolError,
)
from systems.retail.ledger import Guard, Ledger, args_digest
from systems.retail.loading import load_for_tool
from systems.retail.outcome import InvokeResult, Outcome, WriteOutcome
from systems.retail.side_channels import SideChannels
from systems.retail.stores import SEED_STORE, StoreAdmin
from systems.retail.tools import ToolSpec, has_tool, is_read_tool, run_tool, tool_spec

__all__ = [
    "SEED_STORE",
    "Guard",
    "IdempotencyKeyConflict",
    "InvokeResult",
    "Outcome",
    "RetailBackend",
    "UnknownStoreError",
    "UnknownToolError",
    "WriteOutcome",
    "args_digest",
    "make_engine",
]


class RetailBackend(Ledger, StoreAdmin, SideChannels, RecordErasure):
    """Multi-tenant system of record for the τ-bench retail domain.

    ``engine`` should come from :func:`make_engine` (SQLite or PostgreSQL).
    """

    # ------------------------------------------------------------ the catalogue

    @staticmethod
    def has_tool(name: str) -> bool:
        """True if ``name`` is one of the system's tools."""
        return has_tool(name)

    @staticmethod
    def is_read_tool(name: str) -> bool:
        """True for a read tool, False for a write. Raises :class:`UnknownToolError`."""
        return is_read_tool(name)

    # ------------------------------------------------------------ calls

    def read(self, store: str, tool: str, kwargs: dict[str, Any], scope_user_id: str | None = None) -> str:
        """Run a READ tool against ``store``; returns the benchmark's result string.

        With ``scope_user_id``, rows another customer owns (orders) are invisible: the
        tool answers for them exactly as for rows that do not exist (e.g. ``"Error:
        order not found"``). Raises :class:`UnknownToolError` for an unknown tool,
        ``ValueError`` for a write tool, :class:`UnknownStoreError` for an unseeded store.
        """
        spec = tool_spec(tool)
        if not spec.is_read:
            raise ValueError(f"{tool} is a write; use write()")
        return self._read(store, spec, kwargs, scope_user_id, None)

    def _read(self, store: str, spec: ToolSpec, kwargs: dict[str, Any], scope_user_id: str | None,
              guard: Guard | None) -> str:
        with self._tx(write=False) as conn:
            self._require(conn, store)
            data = load_for_tool(conn, store, spec, kwargs, scope_user_id).data()
        refusal = guard(data) if guard is not None else None
        return refusal if refusal is not None else run_tool(data, spec.name, kwargs)

    def invoke(self, store: str, tool: str, arguments: dict[str, Any], idempotency_key: str | None = None,
               scope_user_id: str | None = None, guard: Guard | None = None) -> InvokeResult:
        """Run any tool and classify its answer: the one entry point for callers.

        A read tool runs as :meth:`read` (``idempotency_key`` is not needed and is
        ignored). A write tool runs as :meth:`write` and needs ``idempotency_key``.
        ``scope_user_id`` hides other customers' rows (see :meth:`read`); ``guard`` sees
        the documents the tool will run on (locked, for a write) and may refuse with an
        ``"Error: ..."`` result, which is then the outcome.

        Returns an :class:`InvokeResult`: :attr:`Outcome.APPLIED`, or
        :attr:`Outcome.REFUSED` with the reason for a business error, and ``replayed``
        for a write whose key was already recorded. Raises (the effect of a write is
        then unknown to the caller until a retry with the same key): :class:`UnknownToolError`,
        :class:`UnknownStoreError`, :class:`IdempotencyKeyConflict`, ``ValueError`` for a
        write without a key, and any database error.
        """
        spec = tool_spec(tool)
        if spec.is_read:
            return InvokeResult.of(tool, self._read(store, spec, arguments, scope_user_id, guard))
        if idempotency_key is None:
            raise ValueError(f"{tool} is a write; it needs an idempotency key")
        outcome = self.write(store, tool, arguments, idempotency_key, guard, scope_user_id=scope_user_id)
        return InvokeResult.of(tool, outcome.result, replayed=outcome.replayed)
