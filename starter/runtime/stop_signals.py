"""Stopping what runs until stopped (``statekeeper dev``, ``api``, ``codec-server``) on Ctrl-C,
SIGTERM or SIGHUP: once, through its ``async with`` blocks, whatever signals follow."""

from __future__ import annotations

import asyncio
import signal
from typing import Any, Callable, Coroutine


def stop_signals() -> tuple[int, ...]:
    """SIGINT, SIGTERM and SIGHUP unless SIGHUP is ignored (``nohup``: the user asked for the
    command to outlive its terminal).

    Why SIGHUP: the embedded Temporal server runs in a session of its own, so a closed terminal
    or a dropped ssh connection (SIGHUP to the foreground group) killed `statekeeper dev` outright
    and left its server running with its ports, found only by the next `dev` or `stop`."""
    hangup = () if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN else (signal.SIGHUP,)
    return (signal.SIGINT, signal.SIGTERM, *hangup)


def run_until_stopped(main: Callable[[], Coroutine[Any, Any, Any]]) -> None:
    """``asyncio.run(main())`` where the first Ctrl-C, SIGTERM or SIGHUP cancels ``main``, which
    unwinds through its ``async with`` blocks (servers shut down, the worker drains, an embedded
    Temporal server stops), and any later one is ignored, until the process ends; then raises
    ``KeyboardInterrupt`` (for the command's ``interruptible``: "stopped."). Returns when ``main``
    returns without a signal (the handlers from before are back).

    Why: asyncio's own handler raises ``KeyboardInterrupt`` at the second Ctrl-C wherever the
    event loop is, and uvicorn re-raised each signal it had caught after its shutdown: a SIGTERM
    then a SIGINT 0.1 s apart to `statekeeper dev` printed the API's and codec server's
    tracebacks and left it hung with its Temporal server running; `statekeeper api` printed a
    traceback. Once stopped the signals stay ignored past the event loop: the loop's close put
    Python's default SIGINT handler back, and a Ctrl-C held down through the exit would print
    "Exception ignored in atexit callback ... KeyboardInterrupt" (the tracer provider's), or
    end the command with status 130 before "stopped." is printed. The shutdown is bounded
    (the worker gives activities 10 s)."""
    signals = stop_signals()
    previous = {sig: signal.getsignal(sig) for sig in signals}

    async def guarded() -> bool:
        task, fired = asyncio.current_task(), []

        def first_only() -> None:
            if not fired:
                fired.append(True)
                task.cancel()

        loop = asyncio.get_running_loop()
        for sig in signals:
            loop.add_signal_handler(sig, first_only)
        try:
            await main()
        except asyncio.CancelledError:
            if not fired:
                raise
        finally:
            if fired:  # from here to the process's end: not the loop's, nor the default handler
                for sig in signals:
                    loop.remove_signal_handler(sig)
                    signal.signal(sig, signal.SIG_IGN)
        return bool(fired)

    try:
        stopped = asyncio.run(guarded())
    except BaseException:
        _restore(previous)
        raise
    if stopped:
        raise KeyboardInterrupt
    _restore(previous)  # closing the loop left them at the default


def _restore(previous: dict) -> None:
    for sig, handler in previous.items():
        if handler is not None:
            signal.signal(sig, handler)
