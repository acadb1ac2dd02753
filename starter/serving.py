"""Serving an ASGI app beside other work in this event loop (the API and the codec server
of ``statekeeper dev``): uvicorn in a task, ready once it listens, stopped with the block."""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator

import uvicorn


@contextlib.asynccontextmanager
async def serving(server: uvicorn.Server, what: str, host: str, port: int) -> AsyncIterator[str]:
    """Run ``server`` while the block runs; yields its base URL ``http://host:port``. Raises
    ``OSError`` naming ``what`` when it cannot listen (e.g. the port is taken)."""
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            # uvicorn logs why (e.g. the port is taken) and exits its serve loop
            with contextlib.suppress(SystemExit):
                task.result()
            raise OSError(f"the {what} could not listen on {host}:{port}")
        await asyncio.sleep(0.05)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        await task
