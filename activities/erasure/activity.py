"""``RetentionActivities.purge_expired``: the retention purge as an activity, so a Temporal
Schedule (``RetentionWorkflow``) runs it on any worker of the task queue.

The ``DataErasure`` behind it is made on first use (it opens the audit log), not when the
worker starts. Failures pass as retryable (databases or Temporal unreachable); a purge is
idempotent, so a retry removes only what the failed attempt left.
"""

from __future__ import annotations

from typing import Callable, Optional

from temporalio import activity

from activities.erasure.service import DataErasure
from activities.heartbeat import heartbeating
from workflows.retention.workflow import PurgeRequest, PurgeSummary, RetentionActivitiesApi


class RetentionActivities(RetentionActivitiesApi):
    """The purge over the ``DataErasure`` that ``make_erasure()`` builds (once); register
    ``instance.all()`` with the worker."""

    def __init__(self, make_erasure: Callable[[], DataErasure]) -> None:
        self._make = make_erasure
        self._erasure: Optional[DataErasure] = None

    @activity.defn
    async def purge_expired(self, req: PurgeRequest) -> PurgeSummary:
        """See ``DataErasure.purge``: conversations closed before ``req.older_than``."""
        if self._erasure is None:
            self._erasure = self._make()
        async with heartbeating():
            summary = await self._erasure.purge(req.older_than, req.actor)
        activity.logger.info("retention purge: %s", summary.model_dump())
        return summary

    def all(self) -> list:
        """The activity methods, for ``Worker(activities=...)``."""
        return [self.purge_expired]
