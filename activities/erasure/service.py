"""``DataErasure``: erase one customer's data, or purge the closed conversations older than
a retention period, across everything statekeeper keeps, and leave an audit entry.

What is removed, and where:

- the journal (decision log and transcripts): every conversation of the customer, whole;
- the system of record's side records (``records``): ledger rows, queued emails and
  tickets of those conversations and of the customer's orders (a standalone request's
  ledger row is anonymised, not deleted, so the request is never applied twice);
- Temporal: every run of those conversations and of the customer's refunds (deleted; the
  histories go with them);
- the memory store: every fact remembered about the customer (``activities.store.memory``); a
  purge removes the facts past their expiry, whatever their conversations.

The system of record's own customer profile and orders are not statekeeper's to erase
(the shop keeps orders for its accounts and erases customers by its own procedure).

The Temporal runs are found by the ``CustomerId`` pseudonym (and refunds still running on
the customer's orders by workflow id) and the conversations by the journal, so a second erasure after a failure finds what the first left. Running
conversations or refunds of the customer make an erasure refuse before anything is
removed (``RunningWork``), unless ``terminate_running`` is given.
"""

from __future__ import annotations

import asyncio
import re
from datetime import datetime, timezone
from typing import Any, Optional, Protocol, Sequence

from pydantic import BaseModel
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from activities.erasure.records import (
    RecordCounts,
    conversation_records,
    customer_records,
    expired_request_records,
    forget,
)
from activities.erasure.runs import CONVERSATION_PREFIX, REFUND, SUPPORT, Run, TemporalRuns, conversation_of
from activities.store.journal import Erased, JournalStore
from activities.store.memory import MemoryStore
from systems.retail.backend import RetailBackend
from workflows.domain.pseudonym import customer_pseudonym
from workflows.retention.workflow import PurgeSummary

CUSTOMER_ID = re.compile(r"[A-Za-z0-9#._:@-]{1,128}")
"""A customer id erasure accepts (ASCII; the API's id alphabet)."""
ID_RULE = "a customer id is 1-128 characters of A-Z a-z 0-9 # . _ : @ -"


class AuditSink(Protocol):
    """Where erasures and purges are recorded (``activities.store.audit.AuditLog``)."""

    def record(self, actor: str, action: str, subject: str, detail: str = "") -> None:
        """Append one entry; raises when it cannot be written."""
        ...


class ErasureReport(BaseModel):
    """What an erasure removed: conversations, Temporal runs deleted (of which
    ``terminated`` were running), journal rows and side records. ``pseudonym`` is the
    customer's ``CustomerId`` (the audit entry's subject)."""

    pseudonym: str
    conversations: int = 0
    workflow_runs: int = 0
    terminated: int = 0
    journal_rows: int = 0
    memory_facts: int = 0
    records: RecordCounts = RecordCounts()

    def detail(self) -> str:
        """The counts as ``name=value`` pairs (the audit entry's detail: no personal data)."""
        counts = {**self.model_dump(exclude={"pseudonym", "records"}), **self.records.model_dump()}
        return " ".join(f"{k}={v}" for k, v in counts.items())


class RunningWork(Exception):
    """The customer has running conversations or refunds: nothing was erased."""

    def __init__(self, workflow_ids: list[str]) -> None:
        self.workflow_ids = workflow_ids
        super().__init__(
            f"the customer has {len(workflow_ids)} running conversation(s) or refund(s) ({', '.join(workflow_ids)}); "
            "nothing was erased. Let them finish or cancel them, then erase again, or erase with --terminate-running")


def _journal_rows(erased: Erased) -> int:
    return erased.model_calls + erased.verdicts + erased.transcript + erased.events + erased.refund_events


class DataErasure:
    """Erasure and retention over a Temporal ``client``, the system of record ``backend``,
    the ``journal`` and the ``audit`` log; ``pseudonym_key`` maps customer ids to their
    ``CustomerId`` (needed by ``erase_customer`` only)."""

    def __init__(self, client: Client, backend: RetailBackend, journal: JournalStore, audit: AuditSink,
                 pseudonym_key: Optional[str] = None, channels: Sequence[Any] = (),
                 memory: Optional[MemoryStore] = None) -> None:
        self.runs = TemporalRuns(client)
        self.memory = memory
        """The facts remembered about customers (None: this deployment's erasure leaves them to
        the memory store's own purge)."""
        self.client, self.backend, self.journal, self.audit = client, backend, journal, audit
        self._key = pseudonym_key
        self.channels = list(channels)
        """The external email and ticketing services' adapters (``activities.channels_http``):
        their records of the erased conversations and customer go too."""

    def _erase_channels(self, counts: RecordCounts, conversations: set[str], customer_id: Optional[str] = None
                        ) -> RecordCounts:
        emails = frozenset()
        if customer_id is not None and self.channels:
            emails = frozenset(fp.email for fp in self.backend.customer_footprint(customer_id).values() if fp.email)
        for channel in self.channels:
            deleted = channel.erase(conversations, user_id=customer_id, emails=emails)
            field = "outbox_deleted" if channel.name == "email" else "tickets_deleted"
            setattr(counts, field, getattr(counts, field) + deleted)
        return counts

    async def erase_customer(self, customer_id: str, actor: str, *, terminate_running: bool = False) -> ErasureReport:
        """Erase ``customer_id``'s data everywhere (see the module). Raises ``ValueError`` for
        an id outside ``CUSTOMER_ID`` or without a pseudonym key, ``RunningWork`` (and
        records the refusal) when they have running workflows and not ``terminate_running``;
        database and Temporal errors pass (running it again completes the erasure)."""
        if not CUSTOMER_ID.fullmatch(customer_id):
            raise ValueError(ID_RULE)
        if not self._key:
            raise ValueError("no pseudonym key: the customer's workflows cannot be found")
        pseudonym = customer_pseudonym(customer_id, self._key)
        identities = (customer_id, pseudonym)  # the journal may hold either
        conversations: set[str] = set()
        for identity in identities:
            conversations |= await asyncio.to_thread(self.journal.conversations_of_customer, identity)
        runs = await self.runs.of_customer(identities, conversations)
        footprint = await asyncio.to_thread(self.backend.customer_footprint, customer_id)
        listed = {(r.workflow_id, r.run_id) for r in runs}
        runs += [r for r in await self.runs.running_refunds(
            (store, order) for store, fp in footprint.items() for order in fp.order_ids)
            if (r.workflow_id, r.run_id) not in listed]
        conversations |= {c for r in runs if (c := conversation_of(r.workflow_id))}
        running = [r for r in runs if r.running]
        if running and not terminate_running:
            await asyncio.to_thread(self.audit.record, actor, "erase_customer_refused", pseudonym,
                                    f"running_workflows={len(running)}")
            raise RunningWork(sorted({r.workflow_id for r in running}))
        for run in running:  # stopped before their records go, so they cannot write new ones
            await self._terminate(run)
        records = await asyncio.to_thread(lambda: forget(self.backend, customer_records(
            self.backend, customer_id, conversations)))
        records = await asyncio.to_thread(self._erase_channels, records, conversations, customer_id)
        journal = await asyncio.to_thread(self.journal.erase_conversations, conversations)
        journal.refund_events += await asyncio.to_thread(  # a backend's requests for their orders too
            self.journal.erase_refunds, [r.workflow_id for r in runs if r.workflow_type == REFUND], identities)
        facts = await asyncio.to_thread(self.memory.erase_customer, pseudonym) if self.memory else 0
        report = ErasureReport(pseudonym=pseudonym, conversations=len(conversations), terminated=len(running),
                               workflow_runs=await self.runs.delete(runs), journal_rows=_journal_rows(journal),
                               memory_facts=facts, records=records)
        await asyncio.to_thread(self.audit.record, actor, "erase_customer", pseudonym, report.detail())
        return report

    async def _terminate(self, run: Run) -> None:
        try:
            await self.client.get_workflow_handle(run.workflow_id, run_id=run.run_id).terminate(
                reason="the customer's data is being erased")
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:  # closed meanwhile: nothing to stop
                raise

    async def purge(self, older_than: datetime, actor: str) -> PurgeSummary:
        """Purge every conversation closed before ``older_than`` (aware datetime) whose
        records are all older: Temporal runs (and their refunds'), journal rows and side
        records; standalone requests' side records older than it too, unless their refund runs
        or closed since. Conversations still running, or with a run or a refund running or closed
        since, are kept whole. Records an audit
        entry (subject ``retention``) with the counts; returns them."""
        older_than = older_than.astimezone(timezone.utc)
        closed, keep = await self.runs.expired(older_than)
        stale = await asyncio.to_thread(self.journal.stale_conversations, older_than)
        kept = {c for i in keep if (c := conversation_of(i))}
        conversations = ({c for r in closed if r.workflow_type == SUPPORT and (c := conversation_of(r.workflow_id))}
                         | stale) - kept
        purged = {CONVERSATION_PREFIX + c for c in conversations}
        runs = [r for r in closed if r.workflow_id not in keep and (
            r.workflow_id in purged or (r.workflow_type == REFUND and (r.parent_id is None or r.parent_id in purged)))]

        def side_records() -> RecordCounts:
            found = conversation_records(self.backend, conversations) + expired_request_records(
                self.backend, older_than, keep)
            return self._erase_channels(forget(self.backend, found), conversations)

        records = await asyncio.to_thread(side_records)
        journal = await asyncio.to_thread(self.journal.erase_conversations, conversations)
        # a refund's events go with its runs, and a backend's request's once they are all older
        # (Temporal's own retention may have dropped its run first) unless its run is kept
        stale_refunds = await asyncio.to_thread(self.journal.stale_refunds, older_than)
        journal.refund_events += await asyncio.to_thread(self.journal.erase_refunds, {
            *(r.workflow_id for r in runs if r.workflow_type == REFUND), *(stale_refunds - set(keep))})
        facts = (await asyncio.to_thread(self.memory.purge_expired, datetime.now(timezone.utc))
                 if self.memory else 0)
        summary = PurgeSummary(conversations=len(conversations), workflow_runs=await self.runs.delete(runs),
                               journal_rows=_journal_rows(journal), memory_facts=facts, **records.model_dump())
        detail = f"older_than={older_than:%Y-%m-%dT%H:%M:%SZ} " + " ".join(
            f"{k}={v}" for k, v in summary.model_dump().items())
        await asyncio.to_thread(self.audit.record, actor, "retention_purge", "retention", detail)
        return summary
