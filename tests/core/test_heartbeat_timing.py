"""``activities.heartbeat.heartbeating``: no heartbeat for a block that ends within the first
second (each beat is a server RPC), beats every interval after that (a dead worker is still
noticed at the 3 s heartbeat timeout)."""

from __future__ import annotations

import asyncio

from temporalio.testing import ActivityEnvironment

from activities.heartbeat import FIRST_BEAT_SECONDS, heartbeating
from workflows.options import HEARTBEAT_INTERVAL_SECONDS, HEARTBEAT_TIMEOUT


def _beats_during(seconds: float) -> list[float]:
    env = ActivityEnvironment()
    beats: list[float] = []
    loop_time: list[float] = []
    env.on_heartbeat = lambda *details: beats.append(asyncio.get_running_loop().time() - loop_time[0])

    async def activity_body() -> None:
        loop_time.append(asyncio.get_running_loop().time())
        async with heartbeating():
            await asyncio.sleep(seconds)

    asyncio.run(env.run(activity_body))
    return beats


def test_a_short_block_sends_no_heartbeat():
    assert _beats_during(0.3) == []


def test_a_long_block_beats_after_the_first_second_then_every_interval():
    beats = _beats_during(FIRST_BEAT_SECONDS + 2.2 * HEARTBEAT_INTERVAL_SECONDS)
    assert len(beats) == 3
    assert FIRST_BEAT_SECONDS <= beats[0] < FIRST_BEAT_SECONDS + 0.3
    # the first beat comes well within the heartbeat timeout, which runs from the activity's start
    assert FIRST_BEAT_SECONDS <= HEARTBEAT_TIMEOUT.total_seconds() / 2
