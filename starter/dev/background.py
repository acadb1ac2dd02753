"""``statekeeper dev --detach``: the dev server and worker as a background process, so
the Web UI stays up after a command (e.g. ``make demo``) returns. The background process
records itself in the dev state file (``starter.dev.state``) once its worker polls; that
record is how ``stop`` and the other commands find it from any directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from settings import Settings
from starter.dev import state as devstate, server_owner
from starter.dev.server import DevServerError, private_log

LOG_TAIL_LINES = 15
"""Lines of the background log shown when it fails to start (the reason is in the last ones)."""


def log_path(settings: Settings) -> Path:
    """The background process's log file (in its data directory)."""
    return settings.data_dir / "dev.log"


def start_detached(settings: Settings, timeout_seconds: float = 90.0) -> devstate.DevState:
    """Start ``statekeeper dev`` in a new session with ``settings`` (passed explicitly, data
    directory absolute); returns its record once its worker polls. Returns the running one's
    record when a detached dev server already serves ``settings.temporal_address``.

    Raises ``DevServerError`` when another detached dev server runs at another address, or
    when the new one exits first (the message carries the end of its log: e.g. a task queue
    served by another system of record) or does not come up within ``timeout_seconds``.
    """
    running = devstate.read(settings)
    if running is not None:
        if not running.detached:
            raise DevServerError(f"statekeeper dev already runs in the foreground at {running.temporal_address} "
                                 f"(process {running.pid}); stop it first (Ctrl-C in its terminal, or "
                                 "`statekeeper stop`)")
        if running.temporal_address == settings.temporal_address:
            return running
        raise DevServerError(f"a background statekeeper dev already runs at {running.temporal_address} "
                             f"(data directory {running.data_dir}); stop it first with `statekeeper stop`")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, STATEKEEPER_DATA_DIR=str(settings.data_dir.resolve()),
               STATEKEEPER_TEMPORAL_ADDRESS=settings.temporal_address, STATEKEEPER_UI_PORT=str(settings.ui_port),
               STATEKEEPER_TEMPORAL_NAMESPACE=settings.temporal_namespace,
               STATEKEEPER_TASK_QUEUE=settings.task_queue)
    if settings.dev_state_file is not None:
        env["STATEKEEPER_DEV_STATE_FILE"] = str(devstate.state_file(settings))
    log = log_path(settings)
    with private_log(log) as out:
        proc = subprocess.Popen([sys.executable, "-m", "starter.cli.app", "dev", "--record-state"], env=env,
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    deadline = time.monotonic() + timeout_seconds
    while True:
        recorded = devstate.read(settings)
        if recorded is not None and recorded.pid == proc.pid:
            return recorded
        if proc.poll() is not None:
            raise DevServerError(f"statekeeper dev exited with {proc.returncode}:\n{_tail(log)}\n(log: {log})")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise DevServerError(f"statekeeper dev did not start within {timeout_seconds:.0f} s; see {log}")
        time.sleep(0.2)


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-LOG_TAIL_LINES:])


def stop_detached(settings: Settings, timeout_seconds: float = 15.0) -> bool:
    """Stop the recorded background process group (wherever it was started from); True if
    one was running. SIGINT first (the worker and the server shut down cleanly), SIGKILL
    after ``timeout_seconds``."""
    state = devstate.read(settings)
    if state is None:
        return False
    # a detached dev leads its own process group (its embedded server in it); a foreground one
    # may share its shell's group: only its process is signalled, and it stops what it started
    kill = os.killpg if state.detached else os.kill
    kill(state.pid, signal.SIGINT)
    deadline = time.monotonic() + timeout_seconds
    while devstate.alive(state.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if devstate.alive(state.pid):
        kill(state.pid, signal.SIGKILL)
        # its embedded server runs in a session of its own, and its finally did not run
        server_owner.stop_orphan(state.data_dir, state.temporal_address)
    devstate.remove(settings, state.pid)
    return True
