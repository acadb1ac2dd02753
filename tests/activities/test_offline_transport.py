"""The offline stand-in on a thread of its own (``offline_client(threaded=True)``, what workers
use): the same answer as in the caller's loop, computed on the ``offline-model`` thread, and a
cancelled call stops waiting at once."""

from __future__ import annotations

import asyncio
import threading

import pytest

from activities.llm.model_activity import ModelActivities, offline_client
from systems.model.server import offline_brain
from tests.model_requests import MODEL, request


async def test_a_threaded_stand_in_answers_like_the_in_loop_one_from_its_own_thread():
    threads: list[str] = []

    def brain(view, plan=None):
        threads.append(threading.current_thread().name)
        return offline_brain(view, plan)

    req = request()
    threaded = await ModelActivities(offline_client(10.0, brain=brain, threaded=True), model=MODEL).propose_action(req)
    in_loop = await ModelActivities(offline_client(10.0, brain=brain), model=MODEL).propose_action(req)
    assert threaded.action == in_loop.action
    assert threads == ["offline-model", threading.current_thread().name]


async def test_cancelling_a_threaded_call_stops_the_wait():
    started = threading.Event()

    async def hanging(view, plan=None):
        started.set()
        await asyncio.sleep(600)

    acts = ModelActivities(lambda: offline_client(10.0, brain=hanging, threaded=True), model=MODEL)
    call = asyncio.ensure_future(acts.propose_action(request()))
    await asyncio.to_thread(started.wait, 10)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(call, 5)
