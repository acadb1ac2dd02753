"""Tool activities over the retail system of record: reads, idempotent writes, the
customer-email outbox and human-agent tickets.

Business refusals from the tools are results (``ok=False``, the benchmark's
``"Error: ..."`` text), not exceptions: they are not retried. Only infrastructure
failures raise, and Temporal retries those; a retried write carries the same
idempotency key, so the ledger returns the recorded result instead of applying twice.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Optional

from temporalio import activity
from temporalio.exceptions import ApplicationError

from systems.retail.backend import IdempotencyKeyConflict, RetailBackend, UnknownStoreError
from workflows.actions import ToolClass, call_arguments, tool_class
from workflows.policy import REQUIRED_STATUS, order_precondition
from workflows.transitions import is_error
from workflows.contracts import EmailRequest, ReadToolRequest, TicketRequest, ToolResult, WriteToolRequest


class ToolActivities:
    """Activities bound to one ``RetailBackend``. ``fault_pause_after_commit_seconds``
    (tests only) pauses a write after its commit, to let a test kill the worker there."""

    def __init__(self, backend: RetailBackend, fault_pause_after_commit_seconds: float = 0.0,
                 fault_marker_path: Optional[Path] = None) -> None:
        self._backend = backend
        if fault_pause_after_commit_seconds > 0:
            backend.after_commit_hook = _pause_hook(fault_pause_after_commit_seconds, fault_marker_path)

    @activity.defn(name="run_read_tool")
    async def run_read_tool(self, req: ReadToolRequest) -> ToolResult:
        """Run a read tool; returns its result text. Raises ``ApplicationError``
        (type ``InvalidArguments``, non-retryable) for a write passed as a read."""
        if tool_class(req.call.name) != ToolClass.READ:
            raise ApplicationError(f"{req.call.name} is not a read tool", type="InvalidArguments", non_retryable=True)
        try:
            result = await asyncio.to_thread(self._backend.read, req.store, req.call.name, call_arguments(req.call))
        except UnknownStoreError as err:
            raise ApplicationError(f"unknown store {req.store}", type="UnknownStore", non_retryable=True) from err
        return ToolResult(result=result, ok=not is_error(result))

    @activity.defn(name="run_write_tool")
    async def run_write_tool(self, req: WriteToolRequest) -> ToolResult:
        """Apply a write exactly once per idempotency key (effect and ledger row in one
        transaction). A repeated key returns the recorded result with ``replayed=True``."""
        if tool_class(req.call.name) == ToolClass.READ:
            raise ApplicationError(f"{req.call.name} is not a write tool", type="InvalidArguments", non_retryable=True)
        if not req.idempotency_key.startswith(f"{req.call.name}:"):
            raise ApplicationError("idempotency key does not belong to this tool", type="InvalidArguments",
                                   non_retryable=True)
        args = call_arguments(req.call)
        try:
            outcome = await asyncio.to_thread(
                self._backend.write, req.store, req.call.name, args, req.idempotency_key,
                _order_guard(req.call.name, args.get("order_id")),
            )
        except IdempotencyKeyConflict as err:
            # the same key with another tool or arguments is a caller bug: retrying cannot help
            raise ApplicationError(str(err), type="IdempotencyKeyConflict", non_retryable=True) from err
        except UnknownStoreError as err:
            raise ApplicationError(f"unknown store {req.store}", type="UnknownStore", non_retryable=True) from err
        return ToolResult(result=outcome.result, ok=outcome.ok, replayed=outcome.replayed)

    @activity.defn(name="send_customer_email")
    async def send_customer_email(self, req: EmailRequest) -> bool:
        """Put an email in the outbox once per ``message_key``; True if newly queued."""
        return await asyncio.to_thread(
            self._backend.enqueue_email, req.store, req.message_key, req.to_email, req.subject, req.body
        )

    @activity.defn(name="open_ticket")
    async def open_ticket(self, req: TicketRequest) -> bool:
        """Open a human-agent ticket once per ``ticket_key``; True if newly opened."""
        return await asyncio.to_thread(self._backend.open_ticket, req.store, req.ticket_key, req.user_id, req.summary)

    def all(self) -> list:
        """The four activity methods, for ``Worker(activities=...)``."""
        return [self.run_read_tool, self.run_write_tool, self.send_customer_email, self.open_ticket]


def _order_guard(tool: str, order_id: Optional[str]):
    """The policy's order preconditions (status; a single payment before a cancel),
    evaluated by the backend on the locked order inside the write's transaction."""
    if order_id is None or tool not in REQUIRED_STATUS:
        return None

    def guard(data: dict) -> Optional[str]:
        order = data["orders"].get(order_id)
        if order is None:
            return None  # the tool itself reports the unknown order
        failed = order_precondition(tool, order_id, order["status"], len(order["payment_history"]))
        return f"Error: {failed[1]} ({failed[0].value})" if failed else None

    return guard


def _pause_hook(seconds: float, marker: Optional[Path]):
    def hook(store: str, idempotency_key: str, outcome: object) -> None:
        if marker is not None:
            marker.write_text(idempotency_key)
        time.sleep(seconds)
    return hook
