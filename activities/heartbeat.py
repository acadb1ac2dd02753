"""Heartbeats while an activity waits, so Temporal notices a dead worker within the
activity's heartbeat timeout (seconds) instead of its start-to-close timeout; a retried
attempt also takes its workflow off the previous worker's sticky queue (``activities.sticky``)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator

from temporalio import activity

from activities.sticky import release_sticky
from workflows.options import HEARTBEAT_INTERVAL_SECONDS

FIRST_HEARTBEAT_SECONDS = 1.0
"""The first heartbeat goes this long after the attempt starts, not at once. The server checks
a heartbeat timeout first at start + timeout; finding a heartbeat sent just after the start, it
re-arms its timer for a few milliseconds later, and a timer that close fires only after the
timer processor's maximum time shift (``history.timerProcessorMaxTimeShift``, 1 s by default):
a worker killed in an attempt's first 2.4 s (the SDK's heartbeat throttle) was noticed about
0.9 s after the timeout (bench/turns.py --timeline). A first heartbeat a second in lets that
re-armed timer lie a second or more ahead, which the server keeps to the millisecond."""


@contextlib.asynccontextmanager
async def heartbeating(interval_seconds: float = HEARTBEAT_INTERVAL_SECONDS) -> AsyncIterator[None]:
    """Heartbeat every ``interval_seconds`` until the block ends (outside an activity, e.g.
    when a test calls the method directly, and in a local activity, it does nothing). On a
    retried attempt, ``release_sticky`` runs beside the block and ends before it does, i.e.
    before the activity's result can schedule a workflow task."""
    if not activity.in_activity() or activity.info().is_local:
        # a local activity does not heartbeat: its workflow task's timeout covers it
        yield
        return

    async def beat() -> None:
        await asyncio.sleep(FIRST_HEARTBEAT_SECONDS)
        while True:
            activity.heartbeat()
            await asyncio.sleep(interval_seconds)

    task = asyncio.create_task(beat())
    # a retry (rare) clears the sticky queue meanwhile; the result waits for it
    released = asyncio.create_task(release_sticky()) if activity.info().attempt > 1 else None
    try:
        yield
        if released is not None:
            await released  # never raises; bounded by RELEASE_TIMEOUT_SECONDS
    finally:
        if released is not None:
            released.cancel()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
