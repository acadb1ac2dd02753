"""Stopping what runs until stopped (``statekeeper dev``, ``api``, ``codec-server``) on Ctrl-C or
SIGTERM: once, through its ``async with`` blocks, whatever signals follow."""

from __future__ import annotations

import asyncio
import signal
from typing import Any, Callable, Coroutine

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def run_until_stopped(main: Callable[[], Coroutine[Any, Any, Any]]) -> None:
    """``asyncio.run(main())`` where the first Ctrl-C or SIGTERM cancels ``main``, which unwinds
    through its ``async with`` blocks (servers shut down, the worker drains, an embedded Temporal
    server stops), and any later one is ignored; then raises ``KeyboardInterrupt`` (for the
    command's ``_interruptible``: "stopped."). Returns when ``main`` returns without a signal.

    Why: asyncio's own handler raises ``KeyboardInterrupt`` at the second Ctrl-C wherever the
    event loop is, and uvicorn re-raised each signal it had caught after its shutdown: a SIGTERM
    then a SIGINT 0.1 s apart to `statekeeper dev` printed the API's and codec server's
    tracebacks and left it hung with its Temporal server running; `statekeeper api` printed a
    traceback. The handlers hold until the event loop closes (the shutdown is bounded: the
    worker gives activities 10 s); SIGTERM's handler from before is put back after it."""
    previous = signal.getsignal(signal.SIGTERM)

    async def guarded() -> bool:
        task, fired = asyncio.current_task(), []

        def first_only() -> None:
            if not fired:
                fired.append(True)
                task.cancel()

        loop = asyncio.get_running_loop()
        for sig in _SIGNALS:
            loop.add_signal_handler(sig, first_only)
        try:
            await main()
        except asyncio.CancelledError:
            if not fired:
                raise
        return bool(fired)

    try:
        stopped = asyncio.run(guarded())
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)  # closing the loop left it at the default
    if stopped:
        raise KeyboardInterrupt
