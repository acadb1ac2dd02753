"""Worker processes for ``bench/chaos.py``, forked from one process that has already imported
the worker (``python bench/chaos/zygote.py``).

On a loaded two-core machine a fresh ``python worker.py`` spends tens of seconds importing
before it polls, so a suite that kills a worker every few seconds would measure Python's
start-up and never a worker. This process imports ``worker`` once (no thread and no Temporal
runtime exist yet: safe to fork), then for each line read on stdin (a log file path) forks a
child that runs ``worker.main()`` with its output in that file, and answers the child's pid
on stdout. Each child is a separate process with its own Temporal connection and database
pool, SIGKILLed by the bench like any worker. Children are reaped by the kernel
(``SIGCHLD`` ignored here), so a killed one leaves no zombie.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from starter.runtime import worker  # noqa: E402 - the expensive import, paid once


def _child(log: str) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    code = 0
    try:
        worker.main()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:  # noqa: BLE001 - the log says why; the bench starts another
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def serve() -> None:
    """Fork a worker per line of stdin; print each child's pid."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    print("ready", flush=True)
    for line in sys.stdin:
        log = line.strip()
        if not log:
            continue
        pid = os.fork()
        if pid == 0:
            _child(log)
        print(pid, flush=True)


if __name__ == "__main__":
    serve()
