"""``activities.heartbeat.heartbeating``: no heartbeat for a block that ends within the first
second (each beat is a server RPC), beats every interval after that (a dead worker is still
noticed at the 3 s heartbeat timeout); the first second counts from the attempt's start on the
server, so an activity that waited on a busy worker (an eager start) beats sooner."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime, timedelta, timezone

from temporalio.testing import ActivityEnvironment

from activities.heartbeat import FIRST_BEAT_SECONDS, heartbeating
from workflows.options import HEARTBEAT_INTERVAL_SECONDS, HEARTBEAT_TIMEOUT


def _beats_during(seconds: float, started_ago: float = 0.0) -> list[float]:
    return _beats_and_delay(seconds, started_ago)[0]


def _beats_and_delay(seconds: float, started_ago: float = 0.0) -> tuple[list[float], float]:
    """The beats of a block of ``seconds`` (each in seconds after the block began) and how long
    after the attempt's recorded start the block began (setting the environment up takes a few
    milliseconds, more on a loaded machine: the first beat counts from the attempt's start)."""
    env = ActivityEnvironment()
    # the attempt's start as the server recorded it (the test environment's default is 1970)
    env.info = dataclasses.replace(env.info, started_time=datetime.now(timezone.utc) - timedelta(seconds=started_ago))
    beats: list[float] = []
    loop_time: list[float] = []
    env.on_heartbeat = lambda *details: beats.append(asyncio.get_running_loop().time() - loop_time[0])

    delay: list[float] = []

    async def activity_body() -> None:
        loop_time.append(asyncio.get_running_loop().time())
        delay.append((datetime.now(timezone.utc) - env.info.started_time).total_seconds() - started_ago)
        async with heartbeating():
            await asyncio.sleep(seconds)

    asyncio.run(env.run(activity_body))
    return beats, delay[0]


def test_a_short_block_sends_no_heartbeat():
    assert _beats_during(0.3) == []


def test_a_long_block_beats_after_the_first_second_then_every_interval():
    beats, delay = _beats_and_delay(FIRST_BEAT_SECONDS + 2.2 * HEARTBEAT_INTERVAL_SECONDS)
    assert len(beats) == 3
    assert FIRST_BEAT_SECONDS <= beats[0] + delay < FIRST_BEAT_SECONDS + 0.3
    # the first beat comes well within the heartbeat timeout, which runs from the activity's start
    assert FIRST_BEAT_SECONDS <= HEARTBEAT_TIMEOUT.total_seconds() / 2


def test_an_attempt_that_waited_on_the_worker_beats_the_rest_of_the_first_second_after_it_runs():
    beats = _beats_during(0.6, started_ago=FIRST_BEAT_SECONDS - 0.5)
    assert len(beats) == 1 and 0.45 <= beats[0] < 0.6


def test_an_attempt_that_waited_longer_than_the_first_second_beats_at_once():
    beats = _beats_during(0.2, started_ago=2.5)
    assert len(beats) == 1 and beats[0] < 0.1


def test_a_worker_clock_behind_the_server_never_delays_the_first_beat():
    beats = _beats_during(FIRST_BEAT_SECONDS + 0.2, started_ago=-30.0)
    assert len(beats) == 1 and FIRST_BEAT_SECONDS <= beats[0] < FIRST_BEAT_SECONDS + 0.15
