"""``JournalActivities.record_turn``: one turn's verdicts and transcript entries into the
journal (``store.JournalStore``), as upserts keyed by conversation, turn and sequence number;
``record_refund_events``: a refund's public events.

Failures are typed for the workflow's RetryPolicy (``workflows.options.JOURNAL_RETRY``):
data the database refuses (too long for a column, a wrong type) raises the non-retryable
``InvalidJournalRecord``; anything else (the database is down, locked, unreachable) raises
the retryable ``JournalUnavailable``. Neither message carries the record's text (users'
words): only the exception's type.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import AsyncIterator

import sqlalchemy.exc as sa_exc
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeat import heartbeating
from activities.store.journal import JournalStore
from workflows.activity_api import JournalActivitiesApi
from workflows.domain.errors import ErrorType
from workflows.domain.journal import RefundEventsRecord, TurnRecord

log = logging.getLogger("statekeeper.journal")

BAD_DATA = (sa_exc.DataError, sa_exc.IntegrityError)
"""What the database says about the data itself: a retry would be refused the same way."""


class JournalActivities(JournalActivitiesApi):
    """The journal activity over ``store``; register ``instance.all()`` with the worker."""

    def __init__(self, store: JournalStore) -> None:
        self.store = store

    @activity.defn
    async def record_turn(self, record: TurnRecord) -> int:
        """Upsert ``record`` (see ``JournalStore.record_turn``); returns the verdicts it
        skipped. Raises ``ApplicationError`` ``InvalidJournalRecord`` (non-retryable) or
        ``JournalUnavailable`` (retryable)."""
        async with _typed_failures():
            async with heartbeating():
                skipped = await asyncio.to_thread(self.store.record_turn, record)
        if skipped:
            log.warning("journal: %d verdict(s) of %s named no recorded model call", skipped, record.conversation_id)
        return skipped

    @activity.defn
    async def record_refund_events(self, record: RefundEventsRecord) -> None:
        """Add ``record``'s events (see ``JournalStore.record_refund_events``). Raises
        ``ApplicationError`` as ``record_turn``."""
        async with _typed_failures():
            async with heartbeating():
                await asyncio.to_thread(self.store.record_refund_events, record)

    def all(self) -> list:
        """The activity methods, for ``Worker(activities=...)``."""
        return [self.record_turn, self.record_refund_events]


@contextlib.asynccontextmanager
async def _typed_failures() -> AsyncIterator[None]:
    """The store's failures as the journal's typed ``ApplicationError``s (see the module)."""
    try:
        yield
    except BAD_DATA as exc:
        raise ApplicationError(f"the journal refused the record: {type(exc).__name__}",
                               type=ErrorType.INVALID_JOURNAL_RECORD.value, non_retryable=True) from None
    except Exception as exc:  # noqa: BLE001  (infrastructure: retried for a bounded time)
        raise ApplicationError(f"the journal is unavailable: {type(exc).__name__}",
                               type=ErrorType.JOURNAL_UNAVAILABLE.value) from None
