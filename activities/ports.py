"""Ports: the interfaces through which activities reach external systems.

An activity never knows which system answers; it is given a port, whose adapter holds
the system's client (``activities.retail_port`` for the reference retail system; tests
give fakes or wrappers that inject faults). The tool port is generic — invoke a tool
by name with its arguments — so a new tool needs no new port method.

Contract of every port method: a business answer comes back as a value; a request that
can never succeed raises ``PortError`` (non-retryable, with its ``ErrorType``); any other
exception is an infrastructure failure after which the effect may or may not have
happened, and Temporal retries it (with the same idempotency key).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Protocol

from workflows.domain.contracts import ToolResult
from workflows.domain.errors import ErrorType

Guard = Callable[[dict[str, dict]], Optional[str]]
"""Sees the locked documents a write will touch, inside its transaction, and returns an
``"Error: ..."`` refusal or None (the policy's precondition, checked atomically)."""


class PortError(Exception):
    """A request the system can never serve; ``error_type`` says which kind."""

    def __init__(self, error_type: ErrorType, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


class ToolPort(Protocol):
    """Runs a system's tools. Synchronous; activities call it in a worker thread."""

    def invoke(self, store: str, tool: str, arguments: dict[str, Any], *, idempotency_key: Optional[str] = None,
               scope_user_id: Optional[str] = None, guard: Optional[Guard] = None) -> ToolResult:
        """Run ``tool``: a read (``idempotency_key`` None) scoped to ``scope_user_id``, or a
        write applied exactly once per ``idempotency_key``. Returns an ``applied`` or
        ``refused`` ``ToolResult``; raises ``PortError`` or an infrastructure error."""
        ...

    def recorded(self, store: str, tool: str, arguments: dict[str, Any], idempotency_key: str
                 ) -> Optional[ToolResult]:
        """The outcome the system recorded for a write's ``idempotency_key`` (``replayed``),
        or None if it never ran; ``PortError`` (conflict) if the key holds another call."""
        ...

    def has_store(self, store: str) -> bool:
        """True if the system holds ``store`` (a tenant's copy of the data)."""
        ...


class OutboxPort(Protocol):
    """Queues customer emails exactly once per message key."""

    def enqueue_email(self, store: str, message_key: str, to_email: str, subject: str, body: str) -> bool:
        """True if newly queued, False if the key was already queued."""
        ...


class TicketPort(Protocol):
    """Opens human-agent tickets exactly once per ticket key."""

    def open_ticket(self, store: str, ticket_key: str, user_id: Optional[str], summary: str) -> bool:
        """True if newly opened, False if the key was already open."""
        ...

    def ticket_opened(self, store: str, ticket_key: str) -> bool:
        """True if a ticket is open under ``ticket_key`` (a read; opens nothing)."""
        ...
