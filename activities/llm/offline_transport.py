"""The offline stand-in model on a thread of its own (``offline_client(threaded=True)``).

In process, the stand-in (``systems.model.server.offline_app``: the brain, the modelled prompt
cache, JSON in and out) ran on the worker's event loop, where every activity also heartbeats:
under load one model call's CPU work held the loop for long enough that other model calls
missed their heartbeat timeout and were retried (bench/turns.py at 500 conversations). Here
the app runs on an event loop in a daemon thread, like a remote service: the worker's loop
only waits for its answer. The thread still shares the process (and its CPU accounting).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx2


class ThreadedASGITransport(httpx2.AsyncBaseTransport):
    """``httpx2.ASGITransport`` over ``app``, each request handled on the transport's own event
    loop thread (started here, a daemon: it ends with the process)."""

    def __init__(self, app: Any) -> None:
        self._inner = httpx2.ASGITransport(app=app)
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, name="offline-model", daemon=True).start()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """The app's response to ``request`` (its body already read: the ASGI transport buffers
        it); cancelling the caller cancels the request on the app's loop."""
        done = asyncio.run_coroutine_threadsafe(self._inner.handle_async_request(request), self._loop)
        return await asyncio.wrap_future(done)
