"""Heartbeats while an activity waits, so Temporal notices a dead worker within the
activity's heartbeat timeout (seconds) instead of its start-to-close timeout."""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator

from temporalio import activity

from workflows.options import HEARTBEAT_INTERVAL_SECONDS


@contextlib.asynccontextmanager
async def heartbeating(interval_seconds: float = HEARTBEAT_INTERVAL_SECONDS) -> AsyncIterator[None]:
    """Heartbeat every ``interval_seconds`` until the block ends (outside an activity, e.g.
    when a test calls the method directly, and in a local activity, it does nothing)."""
    if not activity.in_activity() or activity.info().is_local:
        # a local activity does not heartbeat: its workflow task's timeout covers it
        yield
        return

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(interval_seconds)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
