"""Fault injection through the ports, never through production modules: each fault is a
``DelegatingPort`` around the real tool port, overriding only what it breaks.

``PauseAfterWrite`` wraps a real tool port (the retail system stays real): after a
write has committed in the system of record, it records the write's idempotency key
in a marker file and sleeps, so a test can kill the worker, cancel the conversation or
break the database at the point where an applied write's caller has not yet heard.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Optional

from activities.ports import Guard, ToolPort
from workflows.domain.contracts import ToolResult


class DelegatingPort:
    """A ``ToolPort`` that passes everything to ``_inner``; a fault overrides what it breaks."""

    _inner: Any

    def invoke(self, store: str, tool: str, arguments: dict[str, Any], *, idempotency_key: Optional[str] = None,
               scope_user_id: Optional[str] = None, guard: Optional[Guard] = None) -> ToolResult:
        return self._inner.invoke(store, tool, arguments, idempotency_key=idempotency_key,
                                  scope_user_id=scope_user_id, guard=guard)

    def recorded(self, store: str, tool: str, arguments: dict[str, Any], idempotency_key: str
                 ) -> Optional[ToolResult]:
        return self._inner.recorded(store, tool, arguments, idempotency_key)

    def has_store(self, store: str) -> bool:
        return self._inner.has_store(store)


class SlowReads(DelegatingPort):
    """A ``ToolPort`` that sleeps ``seconds`` before each read of a tool in ``tools``, then
    delegates to the port it was ``attach``-ed to: a read in flight that a cancel must stop.
    ``started`` counts the slowed reads."""

    def __init__(self, seconds: float, tools: frozenset[str]) -> None:
        self._inner: Optional[ToolPort] = None
        self._seconds = seconds
        self._tools = tools
        self.started = 0

    def attach(self, inner: ToolPort) -> "SlowReads":
        """Delegate to ``inner``; returns self."""
        self._inner = inner
        return self

    def invoke(self, store: str, tool: str, arguments: dict[str, Any], *, idempotency_key: Optional[str] = None,
               scope_user_id: Optional[str] = None, guard: Optional[Guard] = None) -> ToolResult:
        if idempotency_key is None and tool in self._tools:
            self.started += 1
            time.sleep(self._seconds)
        return self._inner.invoke(store, tool, arguments, idempotency_key=idempotency_key,
                                  scope_user_id=scope_user_id, guard=guard)


class PauseAfterWrite(DelegatingPort):
    """A ``ToolPort`` that delegates to ``inner`` and pauses ``seconds`` after each write
    that applied (not after replays), first writing the key to ``marker``."""

    def __init__(self, inner: ToolPort, seconds: float, marker: Optional[Path] = None) -> None:
        self._inner = inner
        self._seconds = seconds
        self._marker = marker

    def invoke(self, store: str, tool: str, arguments: dict[str, Any], *, idempotency_key: Optional[str] = None,
               scope_user_id: Optional[str] = None, guard: Optional[Guard] = None) -> ToolResult:
        result = self._inner.invoke(store, tool, arguments, idempotency_key=idempotency_key,
                                    scope_user_id=scope_user_id, guard=guard)
        if idempotency_key is not None and not result.replayed:
            if self._marker is not None:
                self._marker.write_text(idempotency_key)
            time.sleep(self._seconds)
        return result


class UnknownWrites(DelegatingPort):
    """A ``ToolPort`` whose writes fail as the unknown-outcome protocol's ``OutcomeUnknown``
    (the system could not say whether the effect happened) while ``armed``; nothing is
    written. Reads, lookups and stores delegate to ``inner``."""

    def __init__(self, inner: ToolPort) -> None:
        self._inner = inner
        self.armed = True

    def invoke(self, store: str, tool: str, arguments: dict[str, Any], *, idempotency_key: Optional[str] = None,
               scope_user_id: Optional[str] = None, guard: Optional[Guard] = None) -> ToolResult:
        from activities.reconcile import OutcomeUnknown

        if idempotency_key is not None and self.armed:
            raise OutcomeUnknown("the payments system could not say whether an earlier attempt took effect")
        return self._inner.invoke(store, tool, arguments, idempotency_key=idempotency_key,
                                  scope_user_id=scope_user_id, guard=guard)


class AppliedButUnseen(UnknownWrites):
    """A ``ToolPort`` whose writes apply and then fail as ``OutcomeUnknown`` while
    ``armed``, and whose ledger cannot be asked meanwhile (``recorded`` raises), so even the
    re-check before escalating cannot see the write: the step is escalated as unknown
    although the system of record holds it applied (as when the database went away
    between the commit and its answer and came back after the escalation)."""

    def invoke(self, store: str, tool: str, arguments: dict[str, Any], *, idempotency_key: Optional[str] = None,
               scope_user_id: Optional[str] = None, guard: Optional[Guard] = None) -> ToolResult:
        from activities.reconcile import OutcomeUnknown

        result = self._inner.invoke(store, tool, arguments, idempotency_key=idempotency_key,
                                    scope_user_id=scope_user_id, guard=guard)
        if idempotency_key is not None and self.armed:
            raise OutcomeUnknown("the connection went away after the commit")
        return result

    def recorded(self, store: str, tool: str, arguments: dict[str, Any], idempotency_key: str
                 ) -> Optional[ToolResult]:
        if self.armed:
            raise ConnectionError("the database went away")
        return self._inner.recorded(store, tool, arguments, idempotency_key)
