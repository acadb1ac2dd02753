"""``statekeeper webhooks listen --detach``: the local receiver (``starter.dev.receiver``) as a
background process beside a detached ``statekeeper dev``, for ``make demo``. It registers a
webhook for every event type pointing at itself, records itself (pid, URL, webhook, counts) in
``<data dir>/webhook-listener.json``, and deletes its webhook when stopped (``statekeeper stop``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ValidationError

from settings import Settings
from starter.dev.receiver import ListenerRecord, read_record, record_path
from starter.dev.server import DevServerError, private_log
from starter.dev.state import alive


def log_path(settings: Settings) -> Path:
    """The background listener's log (its one line per event), in the data directory."""
    return settings.data_dir / "webhook-listener.log"


def start_listener(settings: Settings, port: int = 0, tenant: str | None = None,
                   timeout_seconds: float = 30.0) -> ListenerRecord:
    """Start ``statekeeper webhooks listen --register`` in a new session on ``port`` (0: any free
    one) for ``tenant``; returns its record once it serves with its webhook registered. Returns
    the running one's record when a listener already runs for this data directory.

    Raises ``DevServerError`` when it exits first (the message carries the end of its log: e.g.
    the port is taken, or loopback receivers are not allowed) or is not up within
    ``timeout_seconds``."""
    path = record_path(settings.data_dir)
    running = read_record(path)
    if running is not None:
        return running
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, STATEKEEPER_DATA_DIR=str(settings.data_dir.resolve()),
               STATEKEEPER_WEBHOOK_ALLOW_LOOPBACK=str(settings.webhook_allow_loopback).lower())
    command = [sys.executable, "-m", "starter.cli.app", "webhooks", "listen", "--register", "--record",
               "--port", str(port)]
    if tenant:
        command += ["--tenant", tenant]
    log = log_path(settings)
    with private_log(log) as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    deadline = time.monotonic() + timeout_seconds
    while True:
        recorded = read_record(path)
        if recorded is not None and recorded.pid == proc.pid:
            return recorded
        if proc.poll() is not None:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-10:]) if log.exists() else ""
            raise DevServerError(f"the webhook listener exited with {proc.returncode}:\n{tail}\n(log: {log})")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise DevServerError(f"the webhook listener did not start within {timeout_seconds:.0f} s; see {log}")
        time.sleep(0.1)


def stop_listener(settings: Settings, timeout_seconds: float = 10.0) -> bool:
    """Stop the background listener of ``settings``' data directory; True if one was running.
    SIGINT first (it deletes its webhook on the way out), SIGKILL after ``timeout_seconds``. The
    webhook of a listener that did not delete it (killed, here or before) is deleted here."""
    path = record_path(settings.data_dir)
    try:
        record = ListenerRecord.model_validate(json.loads(path.read_text()))
    except (OSError, ValueError, ValidationError):
        return False
    running = alive(record.pid)
    if running:
        os.kill(record.pid, signal.SIGINT)
        deadline = time.monotonic() + timeout_seconds
        while alive(record.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if alive(record.pid):
            os.kill(record.pid, signal.SIGKILL)
    if record.webhook_id is not None:
        from starter.runtime.webhooks import webhook_store

        store = webhook_store(settings)
        try:
            store.delete(record.tenant or settings.default_tenant, record.webhook_id)  # False: already gone
        finally:
            store.close()
    path.unlink(missing_ok=True)
    return running


class DrainReport(BaseModel):
    """Where a run's deliveries to the listener stand: ``delivered`` (answered 2xx), ``verified``
    (distinct events the listener verified), ``failed`` (retries ran out), ``pending`` (still
    being sent when the wait ended), ``bad_signature`` (requests the listener refused, all runs)."""

    delivered: int = 0
    verified: int = 0
    failed: int = 0
    pending: int = 0
    bad_signature: int = 0


def await_deliveries(settings: Settings, conversation_prefix: str, timeout_seconds: float = 30.0,
                     interval_seconds: float = 0.5) -> Optional[DrainReport]:
    """Wait (at most ``timeout_seconds``) until every delivery of the background listener's
    webhook to conversations whose id starts with ``conversation_prefix`` is delivered or failed
    and the listener has verified each delivered one; returns where they stand then, or None
    when no listener with a webhook runs for ``settings``' data directory."""
    from activities.store.webhooks import DeliveryStatus
    from starter.runtime.webhooks import webhook_store

    record = read_record(record_path(settings.data_dir))
    if record is None or record.webhook_id is None:
        return None
    store = webhook_store(settings)
    deadline = time.monotonic() + timeout_seconds
    try:
        while True:
            counts = store.status_counts(record.webhook_id, conversation_prefix)
            current = read_record(record_path(settings.data_dir)) or record
            report = DrainReport(
                delivered=counts.get(DeliveryStatus.DELIVERED.value, 0), failed=counts.get(DeliveryStatus.FAILED.value, 0),
                pending=sum(n for s, n in counts.items()
                            if s not in (DeliveryStatus.DELIVERED.value, DeliveryStatus.FAILED.value)),
                verified=sum(n for p, n in current.counts.by_process.items() if p.startswith(conversation_prefix)),
                bad_signature=current.counts.bad_signature)
            if (report.pending == 0 and report.verified >= report.delivered) or time.monotonic() > deadline:
                return report
            time.sleep(interval_seconds)
    finally:
        store.close()
