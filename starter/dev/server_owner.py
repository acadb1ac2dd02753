"""Which process started the embedded Temporal server: a record beside the server's database,
so that a server left running by a statekeeper process that was killed (SIGKILL, the OOM killer,
``statekeeper stop``'s last resort) is found and stopped.

Why: the embedded server runs in its own session (``starter.dev.server.embedded_temporal``), so
a process that dies without its ``finally`` leaves it running. Before this record, the next
``statekeeper dev`` took it for "a server already running", used it and did not stop it on exit,
and nothing else knew of it. The record holds pids and the address only.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Optional

from starter.dev.state import alive, stat_fields

RECORD = "temporal-server.owner.json"


def record(data_dir: Path, server_pid: int, address: str) -> None:
    """Record that this process started the server ``server_pid`` serving ``address`` (with the
    server's and this process's start times, ``started``: a pid alone may be reused)."""
    path = data_dir / RECORD
    partial = path.with_name(f".{RECORD}.{os.getpid()}")
    partial.write_text(json.dumps({"server_pid": server_pid, "owner_pid": os.getpid(), "address": address,
                                   "server_started": started(server_pid), "owner_started": started(os.getpid())}))
    partial.replace(path)


def started(pid: int) -> Optional[int]:
    """When process ``pid`` started (clock ticks since boot, /proc/PID/stat's 22nd field), else None."""
    fields = stat_fields(pid)
    try:
        return int(fields[19]) if fields is not None else None
    except (ValueError, IndexError):
        return None


def _serves(command: list[bytes], address: str) -> bool:
    """True when ``command`` is a ``temporal server start-dev`` for ``address`` (its ``--ip`` and
    ``--port``, as ``starter.dev.server.dev_server_command`` writes them)."""
    host, _, port = address.rpartition(":")
    pairs = set(zip(command, command[1:]))
    return b"start-dev" in command and (b"--port", port.encode()) in pairs and \
        (b"--ip", (host or "127.0.0.1").encode()) in pairs


def forget(data_dir: Path, server_pid: int) -> None:
    """Remove the record if it is the one of ``server_pid`` (the server has stopped)."""
    found = _read(data_dir)
    if found is not None and found.get("server_pid") == server_pid:
        (data_dir / RECORD).unlink(missing_ok=True)


def _read(data_dir: Path) -> Optional[dict]:
    try:
        found = json.loads((data_dir / RECORD).read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def orphan(data_dir: Path, address: str) -> Optional[int]:
    """The pid of an embedded server for ``address`` recorded in ``data_dir`` whose owner is
    gone and which still runs as the recorded process: the same start time (when recorded) and
    a ``temporal server start-dev`` for ``address``; else None.

    Why both: the record is only as trustworthy as its pids. Checking "start-dev" alone, a record
    whose server pid had been reused (or was edited) by another statekeeper's embedded server at
    another address and data directory had `statekeeper stop` kill that live server, and its
    dev exit ("the embedded Temporal server ... stopped"). The owner's start time likewise: a
    killed dev's pid reused by an unrelated process (a `sleep`) hid its server from `stop` ("no
    background statekeeper dev is running") and from the next `dev` ("using the server already
    running", never stopped)."""
    found = _read(data_dir)
    if found is None or found.get("address") != address:
        return None
    server, owner = found.get("server_pid"), found.get("owner_pid")
    if not isinstance(server, int) or not isinstance(owner, int) or not alive(server):
        return None
    owner_start = found.get("owner_started")
    if alive(owner) and (not isinstance(owner_start, int) or started(owner) == owner_start):
        return None  # its owner runs (a reused owner pid, another process since, does not count)
    recorded_start = found.get("server_started")
    if isinstance(recorded_start, int) and started(server) != recorded_start:
        return None
    try:
        command = Path(f"/proc/{server}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    return server if _serves(command, address) else None


def stop_orphan(data_dir: Path, address: str, timeout_seconds: float = 10.0) -> bool:
    """Stop the orphaned embedded server of ``data_dir`` at ``address`` (``orphan``): SIGTERM,
    SIGKILL after ``timeout_seconds``; True if there was one."""
    server = orphan(data_dir, address)
    if server is None:
        return False
    os.kill(server, signal.SIGTERM)
    deadline = time.monotonic() + timeout_seconds
    while alive(server) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(server):
        os.kill(server, signal.SIGKILL)
    forget(data_dir, server)
    return True
