"""``RetentionWorkflow``: one retention purge, started by a Temporal Schedule
(``statekeeper retention schedule``) and run by any worker on the task queue.

The workflow computes the cutoff from its own clock (``workflow.now()`` minus the
retention period its input carries) and runs one activity that removes the closed
conversations older than it, everywhere statekeeper keeps them (``activities.erasure``).
The purge is idempotent, so a retried activity or a second run removes nothing twice.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, Field
from temporalio import activity, workflow
from temporalio.common import RetryPolicy

from workflows.domain.errors import ErrorType
from workflows.options import HEARTBEAT_TIMEOUT

PURGE_TIMEOUT = timedelta(minutes=30)
PURGE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=5), backoff_coefficient=2.0,
                          maximum_interval=timedelta(minutes=2), maximum_attempts=5,
                          non_retryable_error_types=[ErrorType.INVALID_ARGUMENTS.value])
"""A purge that cannot reach a database is retried a few times; the next scheduled run
catches up on anything a failed one left."""


class RetentionInput(BaseModel):
    """Input of ``RetentionWorkflow``: purge closed conversations older than
    ``retention_days`` days; ``actor`` names who asked, in the audit log."""

    retention_days: float = Field(gt=0)
    actor: str = Field(default="retention-schedule", min_length=1, max_length=200)


class PurgeRequest(BaseModel):
    """Input of ``purge_expired``: the cutoff (aware UTC datetime) and the audit actor."""

    older_than: datetime
    actor: str = Field(min_length=1, max_length=200)


class PurgeSummary(BaseModel):
    """What a purge removed (counts only, no ids or personal data): ``conversations``
    purged, Temporal workflow runs deleted, journal rows removed, and the system of
    record's side records (ledger rows deleted or anonymised, emails and tickets deleted), and the
    remembered facts past their expiry (``workflows.domain.memory``)."""

    conversations: int = 0
    workflow_runs: int = 0
    journal_rows: int = 0
    ledger_deleted: int = 0
    ledger_anonymised: int = 0
    outbox_deleted: int = 0
    tickets_deleted: int = 0
    memory_facts: int = 0


class RetentionActivitiesApi:
    """The purge, as a typed interface (implemented by ``activities.erasure.activity``)."""

    @activity.defn
    async def purge_expired(self, req: PurgeRequest) -> PurgeSummary:
        """Purge closed conversations whose records are older than ``req.older_than``."""
        raise NotImplementedError


@workflow.defn
class RetentionWorkflow:
    """One retention purge: cutoff from the workflow clock, then one activity."""

    @workflow.run
    async def run(self, inp: RetentionInput) -> PurgeSummary:
        """Purge closed conversations older than ``inp.retention_days``; returns the counts."""
        cutoff = workflow.now() - timedelta(days=inp.retention_days)
        return await workflow.execute_activity_method(
            RetentionActivitiesApi.purge_expired, PurgeRequest(older_than=cutoff, actor=inp.actor),
            start_to_close_timeout=PURGE_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=PURGE_RETRY,
            summary=f"purge closed conversations older than {inp.retention_days:g} days",
        )
