"""A refund's public events (``workflows.domain.journal``), noted in workflow memory and sent
to the journal (``record_refund_events``, its own ``refund_events`` table) at the two moments
a caller waits for: when the refund is parked for a supervisor, and when it ends.

Events, each ``data.refund_id`` (the refund's workflow id) and a sequence per refund:
``approval.requested`` / ``approval.decided`` / ``approval.expired`` (its own approval gate),
``ticket.opened`` (an expired approval, an escalation), ``operation.applied`` /
``operation.refused`` / ``operation.unknown`` (the write), and ``refund.completed`` last, with
the final ``status`` (``applied``, ``refused``, ``escalated``, or ``failed`` when the run itself
fails: a conversation's refund whose write's outcome could not be shown) and, unless applied,
the ``rule`` of the refusal (``REFUSAL_RULES``). Keys as a conversation's
(``approval:<id>:<type>``, ``op:<operation id>:<type>``, ``ticket:<ticket id>``, ``completed``);
a reset gives the events past its reset point new keys (``with_epoch``: a refund never continues
as new, so the epoch lives in memory).

Sending is a journal write (``workflows.journal_write``): new commands, so a refund started
before them sends nothing (``REFUND_EVENTS_PATCH``). Payloads hold ids, amounts (decimal
strings), statuses and rules; never the customer's id, email, name or address, nor a payment
method id. Deterministic workflow code.
"""

from __future__ import annotations

import asyncio
from typing import Any, Optional

from temporalio import workflow

from workflows.activity_api import JournalActivitiesApi
from workflows.domain import journal as ev
from workflows.domain.journal import EventRecord, EventType, RefundEventsRecord
from workflows.domain.policy.clauses import Rule
from workflows.journal_write import write_journal
from workflows.options import TENANT

REFUND_EVENTS_PATCH = "refund-events"
"""``workflow.patched`` id of the journal writes that carry a refund's events."""

REFUSAL_RULES = ("approval-rejected", "approval-expired", "handed-over", "ticket-check-failed",
                 "changed-since-confirmed", "key-conflict", "unknown-store", "tool-error")
"""The ``rule`` of a refused refund that cites no policy clause: a supervisor's rejection, an
expired approval, a human agent already holding the order, the ticketing system not answering
before the approval, the order changed after the user confirmed, a request id reused with other
arguments, a store the system of record does not have, the system's own refusal. A refusal on a
policy clause carries the clause's id (``workflows.domain.policy.clauses.Rule``)."""


def clause_of(refusal: str) -> Optional[str]:
    """The policy clause a refusal reason ends with (``"... (cancel-pending-only)"``), else None."""
    _, sep, tail = refusal.rstrip().rpartition(" (")
    if not sep or not tail.endswith(")"):
        return None
    clause = tail[:-1]
    return clause if clause in {r.value for r in Rule} else None


class RefundEvents:
    """The events of the refund this workflow runs. ``bind`` names it before anything is noted."""

    def __init__(self) -> None:
        self._noted: list[EventRecord] = []
        self._record = RefundEventsRecord(refund_id="")
        self._epoch: Optional[str] = None
        self._writing: Optional[asyncio.Task[None]] = None
        self._on: Optional[bool] = None

    def bind(self, refund_id: str, conversation_id: Optional[str], operation_id: str, call: Any) -> None:
        """The refund ``refund_id`` (started by ``conversation_id``, None for a backend's request)
        of write ``call`` under ``operation_id``; watches for a reset point (``reset_seen``)."""
        # the tenant rides in the record (an activity input: not compared on replay)
        self._record = RefundEventsRecord(refund_id=refund_id, conversation_id=conversation_id,
                                          tenant=workflow.info().typed_search_attributes.get(TENANT))
        self._base = {"operation_id": operation_id, "tool": call.name,
                      "order_id": getattr(call.arguments, "order_id", None)}
        workflow.register_random_seed_callback(self.reset_seen)

    def reset_seen(self, seed: int) -> None:
        """Temporal gave the run a new random seed: it passed a reset point."""
        self._epoch = ev.reset_epoch(seed)

    def customer(self, customer_id: Optional[str]) -> None:
        """The order's owner, for erasure by customer (never in a payload)."""
        if customer_id:
            self._record.customer_id = customer_id

    # --- what happened ----------------------------------------------------------------

    def note(self, key: str, kind: EventType, data: dict[str, Any]) -> None:
        """Note one event (``key``: its business key before the reset epoch)."""
        self._noted.append(EventRecord(key=ev.with_epoch(key, self._epoch), type=kind, at=workflow.now(),
                                       data={"refund_id": self._record.refund_id, **data}))

    def approval(self, approval: Any, kind: EventType) -> None:
        """An event of ``kind`` about ``approval`` (requested, decided, expired)."""
        status = getattr(approval, "status", None)
        data: dict[str, Any] = {**self._base, "approval_id": approval.approval_id,
                                "amount": str(approval.amount) if approval.amount is not None else None,
                                "status": status.value if status is not None else None}
        if kind is EventType.APPROVAL_REQUESTED:
            data["expires_at"] = approval.expires_at.isoformat()
        elif kind is EventType.APPROVAL_DECIDED:
            data["decision"] = data["status"]
            data["decided_at"] = approval.decided_at.isoformat() if approval.decided_at else None
        self.note(ev.approval_key(approval.approval_id, kind), kind, data)

    def operation(self, kind: EventType, amount: Any, approval: Any = None) -> None:
        """The write's outcome: ``operation.applied``, ``.refused`` (rule ``tool-error``) or ``.unknown``."""
        data = {**self._base, "amount": str(amount) if amount is not None else None}
        if approval is not None:
            data["approval_id"] = approval.approval_id
        if kind is EventType.OPERATION_REFUSED:
            data["rule"] = "tool-error"
        self.note(ev.operation_key(self._base["operation_id"], kind), kind, data)

    def ticket(self, ticket_key: str) -> None:
        """A human-agent ticket is open under ``ticket_key`` (named by its id, never its key)."""
        ticket = ev.ticket_id(ticket_key)
        self.note(ev.ticket_key(ticket), EventType.TICKET_OPENED,
                  {"ticket_id": ticket, "reason": ev.ticket_reason(ticket_key),
                   "operation_id": self._base["operation_id"]})

    def completed(self, status: str, amount: Any, rule: Optional[str] = None) -> None:
        """``refund.completed`` with the final ``status`` and, unless applied, the ``rule``."""
        data = {**self._base, "amount": str(amount) if amount is not None else None, "status": status}
        if status != "applied":
            data["rule"] = rule or "tool-error"
        self.note(ev.COMPLETED_KEY, EventType.REFUND_COMPLETED, data)

    # --- sending ----------------------------------------------------------------------

    def _enabled(self) -> bool:
        if self._on is None:
            self._on = workflow.patched(REFUND_EVENTS_PATCH)
        return self._on

    def flush(self) -> None:
        """Send what was noted in the background, after the writes before it (``drain`` waits)."""
        if not self._noted or not self._enabled():
            self._noted = []
            return
        record = self._record.model_copy(update={"events": self._noted})
        self._noted = []
        before = self._writing

        async def write() -> None:
            if before is not None:
                await before
            await write_journal(JournalActivitiesApi.record_refund_events, record, "journal: refund events",
                                f"{len(record.events)} refund event(s)")
        self._writing = asyncio.ensure_future(write())

    async def drain(self) -> None:
        """Send what was noted and wait until every write is done or dropped (before the run ends)."""
        self.flush()
        if self._writing is not None:
            await self._writing
