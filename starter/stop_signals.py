"""Stopping what runs until stopped (``statekeeper dev``, ``api``, ``codec-server``) on Ctrl-C or
SIGTERM, once, through its ``async with`` blocks."""

from __future__ import annotations

import asyncio
import signal


async def until_stopped() -> None:
    """Wait for Ctrl-C or SIGTERM, then return, so that what runs until stopped shuts down
    through its ``async with`` blocks; a second signal while it does is ignored. Before,
    asyncio's own handler (or uvicorn's, re-raising what it caught) raised ``KeyboardInterrupt``
    at the second one, wherever the event loop was: a SIGTERM then a SIGINT 0.1 s apart to
    `statekeeper dev` printed the API's and codec server's tracebacks and left it hung, and
    `statekeeper api` printed a traceback. The handlers stay until
    the event loop closes (the shutdown is bounded: the worker gives activities 10 s)."""
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopped.set)
    await stopped.wait()
