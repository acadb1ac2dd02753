"""``statekeeper dev --detach``: the dev server and worker as a background process, so
the Web UI stays up after a command (e.g. ``make demo``) returns."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from settings import Settings
from starter.devserver import wait_until_reachable


def _pid_file(settings: Settings):
    return settings.data_dir / "dev.pid"


def start_detached(settings: Settings, timeout_seconds: float = 60.0) -> int:
    """Start ``statekeeper dev`` in a new session; returns its pid once Temporal answers.
    Returns the existing pid if one started from this data dir is still alive.
    Raises ``DevServerError`` if it does not come up in time."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    existing = _alive_pid(settings)
    if existing is not None:
        return existing
    log_path = settings.data_dir / "dev.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "starter.cli", "dev"], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    _pid_file(settings).write_text(str(proc.pid))
    wait_until_reachable(settings.temporal_address, proc, "statekeeper dev", log_path, timeout_seconds)
    return proc.pid


def _alive_pid(settings: Settings):
    try:
        pid = int(_pid_file(settings).read_text())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def stop_detached(settings: Settings, timeout_seconds: float = 15.0) -> bool:
    """Stop the background process group; True if one was running."""
    pid = _alive_pid(settings)
    if pid is None:
        return False
    os.killpg(pid, signal.SIGINT)
    deadline = time.monotonic() + timeout_seconds
    while _alive_pid(settings) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    if _alive_pid(settings) is not None:
        os.killpg(pid, signal.SIGKILL)
    _pid_file(settings).unlink(missing_ok=True)
    return True
