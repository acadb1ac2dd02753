"""Heartbeats while an activity waits, so Temporal notices a dead worker within the
activity's heartbeat timeout (seconds) instead of its start-to-close timeout; a retried
attempt also takes its workflow off the previous worker's sticky queue (``activities.sticky``)."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timezone
from typing import AsyncIterator

from temporalio import activity

from activities.sticky import release_sticky
from workflows.options import HEARTBEAT_INTERVAL_SECONDS

FIRST_BEAT_SECONDS = 1.0
"""The first beat of an activity comes this long after the block starts, not at once. Each
beat the SDK sends is an RPC the server persists (``RecordActivityTaskHeartbeat``): beating at
once cost 1.6-2.6 of them per turn, for model calls and journal writes that end in milliseconds
(bench/turns.py). The server's heartbeat timer runs from the activity's start, so a
worker that dies before its first beat is still noticed at the heartbeat timeout (3 s,
``workflows.options.HEARTBEAT_TIMEOUT``): the first beat only has to come well within it."""


@contextlib.asynccontextmanager
async def heartbeating(interval_seconds: float = HEARTBEAT_INTERVAL_SECONDS,
                       first_seconds: float = FIRST_BEAT_SECONDS) -> AsyncIterator[None]:
    """Heartbeat every ``interval_seconds``, the first ``first_seconds`` after the attempt
    started (by the server's clock: sooner when the task waited on this worker), until the block
    ends (outside an activity, e.g. when a test calls the method directly, and in a local
    activity, it does nothing). A block shorter than ``first_seconds`` sends no heartbeat."""
    if not activity.in_activity() or activity.info().is_local:
        # a local activity does not heartbeat: its workflow task's timeout covers it
        yield
        return

    # the server's timer runs from the attempt's start, which for an eager start (the activity
    # handed over in the scheduling workflow task's reply) may be well before this code runs
    # on a busy worker: the first beat comes first_seconds after that start, never later
    started = activity.info().started_time
    waited = (datetime.now(timezone.utc) - (started if started.tzinfo else started.replace(tzinfo=timezone.utc))
              ).total_seconds()
    first = min(first_seconds, max(first_seconds - waited, 0.0))

    async def beat() -> None:
        await asyncio.sleep(first)
        while True:
            activity.heartbeat()
            await asyncio.sleep(interval_seconds)

    task = asyncio.create_task(beat())
    # a retried attempt (rare) clears the sticky queue meanwhile, and its result waits for that:
    # the workflow task the result schedules must not wait for the previous (dead) worker
    released = asyncio.create_task(release_sticky()) if activity.info().attempt > 1 else None
    try:
        yield
        if released is not None:
            await released  # never raises; bounded by activities.sticky.RELEASE_TIMEOUT_SECONDS
    finally:
        if released is not None:
            released.cancel()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
