"""Ending a process that holds a Temporal client or worker without the interpreter's teardown.

The SDK's native (Rust) threads outlive the event loop and may call into Python while the
interpreter finalizes; CPython then aborts with "Fatal Python error: PyGILState_Release ...
finalizing" and status -6 (temporalio/sdk-python issue 300, open). Seen in our CI on a
``statekeeper chat`` that had already printed every reply. So a command ends with
``exit_now``: what teardown would have done for us (exit handlers, log handlers, buffered
output) runs first, while the interpreter is still whole, then ``os._exit``.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import traceback
from typing import Callable, NoReturn


def exit_now(status: int) -> NoReturn:
    """End the process with ``status`` (0-255) after running the exit handlers (e.g. the
    tracer provider's span export), closing log handlers and flushing stdout and stderr;
    never returns. Skips only the interpreter's own teardown."""
    # atexit's runner is the one teardown would call; calling it now runs the same handlers
    # while no native thread can find the interpreter half torn down
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing left to say
            pass
    os._exit(status)


def status_of(ended: SystemExit) -> int:
    """The exit status ``sys.exit`` would have given for ``ended``: None → 0, an int as is,
    anything else printed to stderr → 1 (the interpreter's own rule)."""
    code = ended.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run_and_exit(command: Callable[[], object]) -> NoReturn:
    """Run ``command`` (a console entry, e.g. a Typer app, which ends with ``SystemExit``)
    and end the process with its status through ``exit_now``. An uncaught exception prints
    its traceback and exits 1, as the interpreter would."""
    try:
        command()
        status = 0
    except SystemExit as ended:
        status = status_of(ended)
    except BaseException:  # noqa: BLE001 - the interpreter's default: traceback, status 1
        traceback.print_exc()
        status = 1
    exit_now(status)
