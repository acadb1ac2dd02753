"""Serving an ASGI app beside other work in this event loop (the API and the codec server
of ``statekeeper dev``): uvicorn in a task, ready once it listens, stopped with the block."""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator

import uvicorn


async def _serve(server: uvicorn.Server) -> None:
    try:
        await server.serve()
    except SystemExit as ended:
        # uvicorn ends a failed startup (a taken port) with sys.exit; raised out of a task,
        # asyncio re-raises SystemExit through the event loop, and it ended the whole command
        # (`statekeeper dev` exited 3 when its codec server's port was taken)
        raise OSError(f"uvicorn exited with status {ended.code}") from None


@contextlib.asynccontextmanager
async def serving(server: uvicorn.Server, what: str, host: str, port: int) -> AsyncIterator[str]:
    """Run ``server`` while the block runs; yields its base URL ``http://host:port``. Raises
    ``OSError`` naming ``what`` when it cannot listen (e.g. the port is taken)."""
    task = asyncio.create_task(_serve(server))
    while not server.started:
        if task.done():
            # uvicorn logs why (e.g. the port is taken) and exits its serve loop
            with contextlib.suppress(OSError):
                task.result()
            raise OSError(f"the {what} could not listen on {host}:{port}")
        await asyncio.sleep(0.05)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        await task
