"""The activities the workflows call, declared as typed interfaces.

Workflow code references an activity by its method here
(``workflow.execute_activity_method(ToolActivitiesApi.run_read_tool, ...)``), never by a
name string, so a reader or a type checker can follow a call across the Temporal
boundary. The implementations in ``activities/`` subclass these classes and override
every method with the same ``@activity.defn``; the worker registers those.

Pure: imported inside the workflow sandbox (the bodies never run in a workflow).
"""

from __future__ import annotations

from typing import Optional

from temporalio import activity

from workflows.domain.contracts import (
    EmailRequest,
    ModelRequest,
    ModelResult,
    PseudonymRequest,
    ReadToolRequest,
    StoreCheckRequest,
    TicketLookup,
    TicketRequest,
    ToolResult,
    WriteToolRequest,
)
from workflows.domain.journal import RefundEventsRecord, TurnRecord
from workflows.domain.contracts import AllowanceRequest, TenantAllowance


class ToolActivitiesApi:
    """Tools of the external systems: reads, idempotent writes, the outbox, tickets."""

    @activity.defn
    async def run_read_tool(self, req: ReadToolRequest) -> ToolResult:
        """Run a read tool scoped to the customer; returns its typed outcome."""
        raise NotImplementedError

    @activity.defn
    async def run_write_tool(self, req: WriteToolRequest) -> ToolResult:
        """Apply a write exactly once per idempotency key; returns its typed outcome."""
        raise NotImplementedError

    @activity.defn
    async def find_recorded_write(self, req: WriteToolRequest) -> Optional[ToolResult]:
        """The outcome the system recorded for ``req``'s idempotency key, or None."""
        raise NotImplementedError

    @activity.defn
    async def peek_recorded_write(self, req: WriteToolRequest) -> bool:
        """True if the system holds anything under ``req``'s idempotency key (a read; moves nothing)."""
        raise NotImplementedError

    @activity.defn
    async def check_store(self, req: StoreCheckRequest) -> bool:
        """True if the system of record holds ``req.store`` (a read; changes nothing)."""
        raise NotImplementedError

    @activity.defn
    async def send_customer_email(self, req: EmailRequest) -> bool:
        """Queue one email per message key; True if newly queued."""
        raise NotImplementedError

    @activity.defn
    async def open_ticket(self, req: TicketRequest) -> bool:
        """Open one human-agent ticket per ticket key; True if newly opened."""
        raise NotImplementedError

    @activity.defn
    async def find_ticket(self, req: TicketLookup) -> bool:
        """True if a human-agent ticket is open under ``req.ticket_key`` (a read; opens nothing)."""
        raise NotImplementedError


class ModelActivitiesApi:
    """The stateless model call."""

    @activity.defn
    async def propose_action(self, req: ModelRequest) -> ModelResult:
        """Ask the model for the next ``ProposedAction`` on a snapshot of the state."""
        raise NotImplementedError


class JournalActivitiesApi:
    """The journal: the decision log's verdicts and the transcript of one turn."""

    @activity.defn
    async def record_turn(self, record: TurnRecord) -> int:
        """Upsert a turn's verdicts and transcript entries; returns the verdicts skipped
        (they named a turn without recorded model calls)."""
        raise NotImplementedError

    @activity.defn
    async def record_refund_events(self, record: RefundEventsRecord) -> None:
        """Add a refund's public events (a key already known is left as it was)."""
        raise NotImplementedError


class IdentityActivitiesApi:
    """What only the worker can compute because it holds the secret: customer pseudonyms."""

    @activity.defn
    async def customer_pseudonym(self, req: PseudonymRequest) -> str:
        """The keyed pseudonym of ``req.customer_id`` (``cust-`` + 20 hex characters)."""
        raise NotImplementedError


class TenantActivitiesApi:
    """The tenant's limits as the worker's settings and statekeeper's database know them."""

    @activity.defn
    async def tenant_allowance(self, req: AllowanceRequest) -> TenantAllowance:
        """The tenant's daily token budget and its use today; records the conversation as the tenant's."""
        raise NotImplementedError
