"""The adapter of the reference retail system (``systems.retail``) behind the tool,
outbox and ticket ports: the only activity-side module that knows that system.

It translates the system's own errors into ``PortError`` kinds and its result strings
into typed outcomes; it adds no behaviour.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Optional

from sqlalchemy.exc import DataError

from activities import deadline
from activities.ports import Guard, PortError
from systems.retail.backend import SEED_STORE, RetailBackend
from systems.retail.engine import deadline_scope
from systems.retail.errors import (
    IdempotencyKeyConflict,
    InvalidData,
    UnknownStoreError,
    UnknownToolError,
)
from systems.retail.outcome import InvokeResult
from workflows.domain.contracts import Outcome, ToolResult
from workflows.domain.errors import ErrorType


class RetailPort:
    """``RetailPort(backend)``: implements ``ToolPort``, ``OutboxPort`` and ``TicketPort``
    over a ``RetailBackend`` (its client: a SQLAlchemy engine on SQLite or PostgreSQL)."""

    def __init__(self, backend: RetailBackend) -> None:
        self.backend = backend

    def invoke(self, store: str, tool: str, arguments: dict[str, Any], *, idempotency_key: Optional[str] = None,
               scope_user_id: Optional[str] = None, guard: Optional[Guard] = None) -> ToolResult:
        """See ``activities.ports.ToolPort.invoke``."""
        with _port_errors(tool, store):
            answer = self.backend.invoke(store, tool, arguments, idempotency_key=idempotency_key,
                                         scope_user_id=scope_user_id, guard=guard)
        return _typed(answer)

    def recorded(self, store: str, tool: str, arguments: dict[str, Any], idempotency_key: str
                 ) -> Optional[ToolResult]:
        """See ``activities.ports.ToolPort.recorded``."""
        with _port_errors(tool, store):
            written = self.backend.recorded(store, tool, arguments, idempotency_key)
        return None if written is None else _typed(InvokeResult.of(tool, written.result, replayed=True))

    def has_store(self, store: str) -> bool:
        """See ``activities.ports.ToolPort.has_store``; the seed template is not a store."""
        return store != SEED_STORE and self.backend.store_exists(store)

    def enqueue_email(self, store: str, message_key: str, to_email: str, subject: str, body: str) -> bool:
        """See ``activities.ports.OutboxPort``."""
        with _port_errors("email", store):
            return self.backend.enqueue_email(store, message_key, to_email, subject, body)

    def open_ticket(self, store: str, ticket_key: str, user_id: Optional[str], summary: str) -> bool:
        """See ``activities.ports.TicketPort``."""
        with _port_errors("ticket", store):
            return self.backend.open_ticket(store, ticket_key, user_id, summary)

    def ticket_opened(self, store: str, ticket_key: str) -> bool:
        """See ``activities.ports.TicketPort``."""
        with _port_errors("ticket", store):
            return self.backend.ticket_opened(store, ticket_key)


@contextmanager
def _port_errors(tool: str, store: str) -> Iterator[None]:
    """The system's own errors as ``PortError`` kinds; anything else passes (infrastructure).
    Its transactions end before the current attempt's deadline (``activities.deadline``)."""
    try:
        with deadline_scope(deadline.current()):
            yield
    except UnknownToolError as err:
        raise PortError(ErrorType.UNKNOWN_TOOL, f"the retail system has no tool {tool}") from err
    except UnknownStoreError as err:
        raise PortError(ErrorType.UNKNOWN_STORE, f"unknown store {store}") from err
    except (DataError, InvalidData) as err:
        # the database refused the values themselves (e.g. a NUL character on PostgreSQL): a
        # retry fails the same way, and the transaction, effect and ledger row, rolled back
        raise PortError(ErrorType.INVALID_DATA, "the retail system refused the data as invalid") from err
    except IdempotencyKeyConflict as err:
        # the same key with another tool or arguments: retrying cannot help
        raise PortError(ErrorType.IDEMPOTENCY_KEY_CONFLICT, str(err)) from err


def _typed(answer: InvokeResult) -> ToolResult:
    return ToolResult(result=answer.result, outcome=Outcome.APPLIED if answer.applied else Outcome.REFUSED,
                      replayed=answer.replayed)
