"""Ending a process that holds a Temporal client or worker without the interpreter's teardown.

The SDK's native (Rust) threads outlive the event loop and may call into Python while the
interpreter finalizes; CPython then aborts with "Fatal Python error: PyGILState_Release ...
finalizing" and status -6 (open upstream: github.com/temporalio/sdk-python/issues/300), e.g. a
``statekeeper chat`` that had already printed every reply. So a command ends with
``exit_now``: what teardown would have done for us (exit handlers, log handlers, buffered
output, the status 120 of output that could not be written) runs first, while the
interpreter is still whole, then ``os._exit``.
"""

from __future__ import annotations

import atexit
import errno
import logging
import os
import sys
from typing import Callable, NoReturn

UNWRITTEN_OUTPUT = 120
"""The interpreter's exit status when flushing stdout at exit fails (a full disk, a closed pipe)."""


def exit_now(status: int, exit_handlers: bool = True) -> NoReturn:
    """End the process with ``status`` (0-255) after running the exit handlers (e.g. the
    tracer provider's span export; not when ``exit_handlers`` is False), closing log
    handlers and flushing stdout and stderr; never returns. When stdout's buffered output
    cannot be written, a successful status becomes 120 and stderr says why (not for a reader
    that went away: EPIPE), as the interpreter's own exit does. A stream that is closed
    (None) is skipped. Skips only the interpreter's own teardown."""
    try:
        if exit_handlers:
            # atexit's runner is the one teardown would call; calling it now runs the same
            # handlers while no native thread can find the interpreter half torn down
            atexit._run_exitfuncs()
        logging.shutdown()
        if not _flushed(sys.stdout) and status == 0:
            status = UNWRITTEN_OUTPUT
        _flushed(sys.stderr)
    finally:
        os._exit(status)  # whatever happened above (even a Ctrl-C): never the teardown


def _flushed(stream) -> bool:
    if stream is None:  # the descriptor was closed when the process started
        return True
    try:
        stream.flush()
        return True
    except (OSError, ValueError) as err:
        if getattr(err, "errno", None) != errno.EPIPE and sys.stderr is not None and stream is not sys.stderr:
            try:
                sys.stderr.write(f"statekeeper: output not written: {err}\n")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
        return False


def status_of(ended: SystemExit) -> int:
    """The exit status ``sys.exit`` would have given for ``ended``: None → 0, an int as is,
    anything else printed to stderr → 1 (the interpreter's own rule)."""
    code = ended.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    if sys.stderr is not None:
        print(code, file=sys.stderr)
    return 1


def run_and_exit(command: Callable[[], object]) -> NoReturn:
    """Run ``command`` (a console entry, e.g. a Typer app, which ends with ``SystemExit``)
    and end the process with its status through ``exit_now``. An uncaught exception goes to
    ``sys.excepthook`` (Typer's, where it installed one) and exits 1, as the interpreter
    would."""
    try:
        command()
        status = 0
    except SystemExit as ended:
        status = status_of(ended)
    except BaseException:  # noqa: BLE001 - the interpreter's default: the hook, status 1
        status = 1
        try:
            sys.excepthook(*sys.exc_info())
        except BaseException:  # noqa: BLE001 - e.g. stderr is gone: the status still says it
            pass
    exit_now(status)
