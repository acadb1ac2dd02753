"""The HTTP API served over real HTTP (uvicorn on a free loopback port) in the test's own
event loop, over a ``StatekeeperClient`` of a running test worker; and a blocking runner
for test code that must make ordinary, synchronous HTTP calls to it (hypothesis and
schemathesis drive requests synchronously), which runs in a thread while the loop keeps
serving the API and the worker."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator, Callable, Optional

import uvicorn

from activities.store.journal import JournalStore
from settings import Settings
from starter.api.application import create_app
from starter.client.conversations import StatekeeperClient


@contextlib.asynccontextmanager
async def live_api(client: StatekeeperClient, settings: Settings, access: Any = None) -> AsyncIterator[str]:
    """Serve ``create_app`` over ``client`` (and the journal ``settings`` names; ``access``:
    ``create_app``'s, by default keyless on loopback) at ``http://127.0.0.1:<free port>`` while
    the block runs; yields that base URL."""
    app = create_app(lambda: client, lambda: JournalStore(settings.resolved_journal_url()), access=access)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
            raise OSError("the API did not start")
        await asyncio.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


async def blocking(fn: Callable[..., Any], *args: Any, timeout: Optional[float] = None) -> Any:
    """Run the synchronous ``fn(*args)`` in a thread (the event loop goes on serving) and
    return its result; ``timeout`` seconds at most."""
    return await asyncio.wait_for(asyncio.to_thread(fn, *args), timeout)
