"""Ctrl-C and SIGTERM while the ``statekeeper`` command line is still loading.

Why: importing the command line (Temporal SDK, FastAPI, SQLAlchemy, the workflows) takes
about 1.5 s on a loaded machine, before any command has started anything. A Ctrl-C in that
window raised ``KeyboardInterrupt`` inside the import machinery: a screenful of traceback and
a process killed by the signal (status -2); a SIGTERM killed it outright. ``hold`` (first
thing in ``starter.cli.app``) makes either end the process at once, quietly, with "stopped." and
status 130 as a command cut short later does (``starter.cli.support.interruptible``);
``release`` (once the imports are done) puts the previous handlers back, so the command's own
handling applies from then on. Nothing is open or started while held, so nothing is lost.
"""

from __future__ import annotations

import os
import signal
import threading

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_held: dict[int, object] = {}


def _stop(signum: int, frame: object) -> None:
    try:
        os.write(1, b"\nstopped.\n")
    except OSError:  # stdout closed or gone: the status still says it
        pass
    os._exit(130)


def hold() -> None:
    """While loading: SIGINT and SIGTERM end the process quietly (status 130). Only in the
    main thread, and only for a signal at its default (one the parent ignores, e.g. SIGINT of
    a background job, stays ignored)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in _SIGNALS:
        previous = signal.getsignal(signum)
        if previous in (signal.default_int_handler, signal.SIG_DFL):
            _held[signum] = previous
            signal.signal(signum, _stop)


def release() -> None:
    """Loading is done: the handlers ``hold`` replaced are back."""
    while _held:
        signum, previous = _held.popitem()
        signal.signal(signum, previous)  # type: ignore[arg-type]
