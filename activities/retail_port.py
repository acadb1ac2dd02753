"""The adapter of the reference retail system (``systems.retail``) behind the tool,
outbox and ticket ports: the only activity-side module that knows that system.

It translates the system's own errors into ``PortError`` kinds and its result strings
into typed outcomes; it adds no behaviour.
"""

from __future__ import annotations

from typing import Any, Optional

from activities.ports import Guard, PortError
from activities.retail.backend import IdempotencyKeyConflict, RetailBackend, UnknownStoreError
from activities.retail.tools import UnknownToolError
from workflows.contracts import Outcome, ToolResult
from workflows.errors import ErrorType


class RetailPort:
    """``RetailPort(backend)``: implements ``ToolPort``, ``OutboxPort`` and ``TicketPort``
    over a ``RetailBackend`` (its client: a SQLAlchemy engine on SQLite or PostgreSQL)."""

    def __init__(self, backend: RetailBackend) -> None:
        self.backend = backend

    def invoke(self, store: str, tool: str, arguments: dict[str, Any], *, idempotency_key: Optional[str] = None,
               scope_user_id: Optional[str] = None, guard: Optional[Guard] = None) -> ToolResult:
        """See ``activities.ports.ToolPort.invoke``."""
        try:
            if idempotency_key is None:
                result = self.backend.read(store, tool, arguments)
                return ToolResult(result=result, outcome=_outcome(result))
            written = self.backend.write(store, tool, arguments, idempotency_key, guard)
        except UnknownToolError as err:
            raise PortError(ErrorType.UNKNOWN_TOOL, f"the retail system has no tool {tool}") from err
        except UnknownStoreError as err:
            raise PortError(ErrorType.UNKNOWN_STORE, f"unknown store {store}") from err
        except IdempotencyKeyConflict as err:
            # the same key with another tool or arguments is a caller bug: retrying cannot help
            raise PortError(ErrorType.IDEMPOTENCY_KEY_CONFLICT, str(err)) from err
        return ToolResult(result=written.result, outcome=_outcome(written.result), replayed=written.replayed)

    def enqueue_email(self, store: str, message_key: str, to_email: str, subject: str, body: str) -> bool:
        """See ``activities.ports.OutboxPort``."""
        return self.backend.enqueue_email(store, message_key, to_email, subject, body)

    def open_ticket(self, store: str, ticket_key: str, user_id: Optional[str], summary: str) -> bool:
        """See ``activities.ports.TicketPort``."""
        return self.backend.open_ticket(store, ticket_key, user_id, summary)


def _outcome(result: str) -> Outcome:
    return Outcome.REFUSED if result.startswith("Error") else Outcome.APPLIED
