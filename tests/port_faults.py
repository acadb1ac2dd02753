"""The fault kinds of the external services (``systems.service_kit.faults``), injected into
the in-process retail system through its port, for the tool-class × fault matrix:

- ``http_5xx``: fails before touching the system;
- ``fail_before_commit``: fails inside the write's transaction (from its guard): rolled back;
- ``commit_then_drop``: the call completes, then the answer is lost (an exception);
- ``answer_after_timeout``: the call completes, the answer comes after the attempt's deadline;
- ``slow_lock``: the transaction holds its locks past the attempt's deadline (rolled back).

Each armed fault hits one call of its tool (``arm(tool, fault)``); ``hits`` counts them.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any, Optional

from activities import deadline
from activities.ports import Guard, ToolPort
from workflows.domain.contracts import ToolResult


class InjectedFault(ConnectionError):
    """A lost answer or an unavailable system (retryable, like a network failure)."""


class FaultyPort:
    """``FaultyPort().attach(port)``: a ``ToolPort`` that injects armed faults."""

    def __init__(self) -> None:
        self._inner: Optional[ToolPort] = None
        self._armed: dict[str, list[str]] = defaultdict(list)
        self.hits: list[tuple[str, str]] = []

    def attach(self, inner: ToolPort) -> "FaultyPort":
        self._inner = inner
        return self

    def arm(self, tool: str, fault: str, count: int = 1) -> None:
        self._armed[tool] += [fault] * count

    def invoke(self, store: str, tool: str, arguments: dict[str, Any], *, idempotency_key: Optional[str] = None,
               scope_user_id: Optional[str] = None, guard: Optional[Guard] = None) -> ToolResult:
        fault = self._armed[tool].pop(0) if self._armed[tool] else None
        if fault is not None:
            self.hits.append((tool, fault))
        if fault == "http_5xx":
            raise InjectedFault("injected: the system is unavailable")
        inner_guard = guard
        if fault in ("fail_before_commit", "slow_lock"):
            def guard(data: dict, _fault: str = fault) -> Optional[str]:  # noqa: F811 - inside the transaction
                if _fault == "fail_before_commit":
                    raise InjectedFault("injected: failed before commit")
                end = deadline.current()
                time.sleep(max(0.0, (end or time.time()) - time.time()) + 0.2)  # past the deadline
                return inner_guard(data) if inner_guard else None
            if idempotency_key is None:  # a read has no transaction to fail in: fail before it
                if fault == "fail_before_commit":
                    raise InjectedFault("injected: failed before answering")
                guard = inner_guard
                end = deadline.current()
                time.sleep(max(0.0, (end or time.time()) - time.time()) + 0.2)
        result = self._inner.invoke(store, tool, arguments, idempotency_key=idempotency_key,
                                    scope_user_id=scope_user_id, guard=guard)
        if fault == "commit_then_drop":
            raise InjectedFault("injected: the answer was lost")
        if fault == "answer_after_timeout":
            end = deadline.current()
            time.sleep(max(0.0, (end or time.time()) - time.time()) + 2.0)  # Temporal times the attempt out
        return result

    def recorded(self, store: str, tool: str, arguments: dict[str, Any], idempotency_key: str
                 ) -> Optional[ToolResult]:
        return self._inner.recorded(store, tool, arguments, idempotency_key)

    def has_store(self, store: str) -> bool:
        return self._inner.has_store(store)
