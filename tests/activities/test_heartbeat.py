"""``activities.heartbeat.heartbeating``: no heartbeat in an attempt's first
``FIRST_HEARTBEAT_SECONDS`` (a heartbeat just after the start makes the server re-arm its
heartbeat timer a few milliseconds ahead, which it fires up to a second late), then one every
``HEARTBEAT_INTERVAL_SECONDS`` until the block ends."""

from __future__ import annotations

import asyncio

from temporalio import activity
from temporalio.testing import ActivityEnvironment

from activities.heartbeat import FIRST_HEARTBEAT_SECONDS, heartbeating


@activity.defn
async def waits(seconds: float) -> None:
    async with heartbeating(interval_seconds=0.1):
        await asyncio.sleep(seconds)


async def test_no_heartbeat_in_the_first_second_then_regular_ones():
    env = ActivityEnvironment()
    beats: list[tuple] = []
    env.on_heartbeat = lambda *details: beats.append(details)
    await env.run(waits, FIRST_HEARTBEAT_SECONDS / 2)
    assert beats == []  # ended before the first heartbeat was due
    await env.run(waits, FIRST_HEARTBEAT_SECONDS + 0.35)
    assert 1 <= len(beats) <= 5  # the first at FIRST_HEARTBEAT_SECONDS, then every 0.1 s
