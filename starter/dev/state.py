"""The running dev server's record: what ``statekeeper dev`` (detached or in the foreground) runs
with, in one well-known file, so ``chat``, ``state``, ``stop`` and ``taubench`` started from any directory
use its data directory (its system of record) instead of seeding a new one beside them.

The file (``Settings.dev_state_file``; default ``$XDG_STATE_HOME/statekeeper/dev.json``, else
``~/.local/state/statekeeper/dev.json``) is written by the dev process once its worker polls
(a foreground one only when no other live dev is recorded), and removed when it stops. It holds no secret: the database appears only as its
fingerprint (``starter.runtime.system_of_record``).
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ValidationError

from settings import Settings
from starter.runtime.system_of_record import fingerprint


class DevState(BaseModel):
    """A running detached dev server: its process group leader's pid, absolute data directory,
    Temporal address, Web UI port, HTTP API URL (None when its port was taken), namespace,
    task queue, database fingerprint and start time."""

    pid: int
    data_dir: Path
    temporal_address: str
    ui_port: int
    api_url: Optional[str] = None
    temporal_namespace: str
    task_queue: str
    db_fingerprint: str
    default_database: bool
    """True when the database is the SQLite file in ``data_dir`` (adopting the data directory
    then means adopting the database); False for an explicit ``STATEKEEPER_DATABASE_URL``."""
    started_at: datetime
    payments_url: Optional[str] = None
    email_url: Optional[str] = None
    ticketing_url: Optional[str] = None
    """The external services the dev worker uses: every worker on its task queue must use the same."""
    webhook_allow_loopback: bool = True
    """Webhooks may reach loopback receivers (``statekeeper dev`` allows them; the commands beside it too)."""
    detached: bool = True
    """False for a foreground `statekeeper dev` (its process, not its group, is signalled to stop
    it). Recorded too, so a `chat` beside it uses its services (otherwise that chat is refused:
    "a worker configured with other external services")."""
    started_server: bool = True
    """False when the dev uses a Temporal server that was already running (another user's, on a
    shared machine): the Web UI is then that server's, not necessarily at ``ui_port``."""


def state_file(settings: Settings) -> Path:
    """Where the record lives for ``settings`` (see the module docstring)."""
    if settings.dev_state_file is not None:
        return settings.dev_state_file.expanduser().resolve()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "statekeeper" / "dev.json"


def describe(settings: Settings, pid: int, api_url: Optional[str] = None, detached: bool = True,
             started_server: bool = True) -> DevState:
    """The record of a dev server running with ``settings`` as process ``pid`` (its HTTP API
    at ``api_url``, if served; ``detached`` False: in the foreground; ``started_server`` False:
    on a Temporal server that was already running)."""
    return DevState(pid=pid, data_dir=settings.data_dir.resolve(), temporal_address=settings.temporal_address,
                    ui_port=settings.ui_port, api_url=api_url, temporal_namespace=settings.temporal_namespace,
                    task_queue=settings.task_queue, db_fingerprint=fingerprint(settings.resolved_database_url()),
                    default_database=settings.database_url is None, started_at=datetime.now(timezone.utc),
                    payments_url=settings.payments_url, email_url=settings.email_url,
                    ticketing_url=settings.ticketing_url, detached=detached, started_server=started_server,
                    webhook_allow_loopback=settings.webhook_allow_loopback)


def write(settings: Settings, state: DevState) -> None:
    """Record ``state`` (atomically: readers never see half a file)."""
    path = state_file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(state.model_dump_json(indent=2))
    partial.replace(path)


def read(settings: Settings) -> Optional[DevState]:
    """The recorded dev server if its process is still alive, else None (no file, an
    unreadable one, or a stale one left by a process that died)."""
    try:
        state = DevState.model_validate(json.loads(state_file(settings).read_text()))
    except (OSError, ValueError, ValidationError):
        return None
    return state if alive(state.pid) else None


def remove(settings: Settings, pid: int) -> None:
    """Delete the record if it is the one of process ``pid`` (a newer one stays)."""
    path = state_file(settings)
    try:
        recorded = DevState.model_validate(json.loads(path.read_text()))
    except (OSError, ValueError, ValidationError):
        return
    if recorded.pid == pid:
        path.unlink(missing_ok=True)


def stat_fields(pid: int) -> Optional[list[str]]:
    """Process ``pid``'s /proc/PID/stat fields after its command name (the state first), or
    None without /proc or the process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """True while process ``pid`` exists (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    fields = stat_fields(pid)
    return fields is None or fields[0] != "Z"  # no /proc: trust kill


ADOPTED = ("data_dir", "task_queue", "ui_port", "temporal_namespace", "payments_url", "email_url", "ticketing_url",
           "webhook_allow_loopback")


def adopt(settings: Settings) -> Settings:
    """``settings`` completed from the running detached dev server at the same Temporal
    address: its data directory (unless ``STATEKEEPER_DATA_DIR`` or ``STATEKEEPER_DATABASE_URL``
    was given), task queue, Web UI port and namespace (each unless given). Unchanged when no
    detached dev server runs there. A database that still differs (the dev server was started
    with an explicit URL) is caught by the task-queue check (``starter.runtime.preflight``)."""
    state = read(settings)
    if state is None or state.temporal_address != settings.temporal_address:
        return settings
    given = settings.model_fields_set
    update = {name: getattr(state, name) for name in ADOPTED if name not in given}
    if "database_url" in given:
        update.pop("data_dir", None)
    return settings.model_copy(update=update)
