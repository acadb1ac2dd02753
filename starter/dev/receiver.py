"""A local webhook receiver (``statekeeper webhooks listen``): an HTTP server on loopback that
verifies each delivery's Standard Webhooks signature (``standardwebhooks.Webhook.verify``),
deduplicates by ``webhook-id``, prints each new event on one line and keeps counts.

Answers: 204 to a verified delivery (a repeat too: delivery is at least once), 400 to a bad or
missing signature (counted, nothing printed), 413 to a body over ``MAX_BODY_BYTES``, 404 to
anything but ``POST``. The counts can be written (atomically, after each request) to a JSON file
(``ListenerRecord``) that ``statekeeper taubench`` and ``statekeeper stop`` read.
"""

from __future__ import annotations

import json
import os
import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Optional

from pydantic import BaseModel, Field, ValidationError
from standardwebhooks import Webhook, WebhookVerificationError

MAX_BODY_BYTES = 1_000_000
"""A delivery is one event (a few KB); anything larger is refused unread."""
MAX_PROCESSES = 10_000
"""Per-process counts kept at most (the oldest process is dropped first)."""


class Counts(BaseModel):
    """What the receiver has seen: ``received`` requests that passed the signature check,
    ``verified`` distinct events among them (by ``webhook-id``), ``duplicates`` repeats,
    ``bad_signature`` requests answered 400, and ``by_process``: distinct events per
    conversation or refund id."""

    received: int = 0
    verified: int = 0
    duplicates: int = 0
    bad_signature: int = 0
    by_process: dict[str, int] = Field(default_factory=dict)


class ListenerRecord(BaseModel):
    """A running listener: its process, URL, the webhook it registered (None: given a secret),
    that webhook's tenant, when it started, and its counts so far."""

    pid: int
    url: str
    webhook_id: Optional[str] = None
    tenant: Optional[str] = None
    started_at: datetime
    counts: Counts = Field(default_factory=Counts)


def event_line(event: dict) -> str:
    """One line for a verified event: type, sequence and process id (``data.conversation_id`` or
    ``data.refund_id``)."""
    data = event.get("data") if isinstance(event.get("data"), dict) else {}
    process = data.get("conversation_id") or data.get("refund_id") or "-"
    return f"{event.get('type', '?'):<24} seq {event.get('sequence', '?'):>3}  {process}"


class Receiver:
    """Verifies and deduplicates deliveries signed with ``secret`` (``whsec_...``; None: not
    known yet, see ``use_secret``); calls ``on_event(event)`` for each new event and
    ``on_change(counts)`` after each request; ``keep`` also keeps every event and delivery (a
    test's receiver; a long-running listener keeps only the ids it has seen). Thread-safe (the
    HTTP server handles requests on threads)."""

    def __init__(self, secret: Optional[str], on_event: Callable[[dict], None] = lambda e: None,
                 on_change: Callable[[Counts], None] = lambda c: None, keep: bool = False) -> None:
        self.hook = Webhook(secret) if secret else None
        self.on_event = on_event
        self.on_change = on_change
        self.counts = Counts()
        self.seen: set[str] = set()
        """The ``webhook-id`` of every verified delivery (what deduplicates)."""
        self.keep = keep
        self.events: dict[str, dict] = {}
        """With ``keep``: the first body of each distinct ``webhook-id``, in arrival order."""
        self.deliveries: list[tuple[str, dict]] = []
        """With ``keep``: every verified request's ``(webhook-id, event)``, repeats included."""
        self._lock = threading.Lock()

    def use_secret(self, secret: str) -> None:
        """Verify with ``secret`` from now on (a webhook made after the receiver started
        listening: its URL needed the port)."""
        self.hook = Webhook(secret)

    def receive(self, body: bytes, headers: dict[str, str]) -> int:
        """The HTTP status for one delivery: 204 verified (new or repeated), 400 not, 503
        before the secret is known (the sender retries)."""
        if self.hook is None:
            return 503
        try:
            event = self.hook.verify(body, headers)
        except (WebhookVerificationError, ValueError):
            with self._lock:
                self.counts.bad_signature += 1
                snapshot = self.counts.model_copy(deep=True)
            self.on_change(snapshot)
            return 400
        webhook_id = {k.lower(): v for k, v in headers.items()}["webhook-id"]
        with self._lock:
            self.counts.received += 1
            new = webhook_id not in self.seen
            if self.keep:
                self.deliveries.append((webhook_id, event))
                self.events.setdefault(webhook_id, event)
            if new:
                self.seen.add(webhook_id)
                self.counts.verified += 1
                data = event.get("data") if isinstance(event, dict) and isinstance(event.get("data"), dict) else {}
                process = str(data.get("conversation_id") or data.get("refund_id") or "-")
                by_process = self.counts.by_process
                by_process[process] = by_process.pop(process, 0) + 1  # most recent last
                while len(by_process) > MAX_PROCESSES:
                    by_process.pop(next(iter(by_process)))
            else:
                self.counts.duplicates += 1
            snapshot = self.counts.model_copy(deep=True)
        if new:
            self.on_event(event)
        self.on_change(snapshot)
        return 204


def serve(receiver: Optional[Receiver], port: int = 0, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """A server for ``receiver`` (``server.receiver``; while None, each request is answered 503)
    bound to ``host:port`` (0: any free port; read it from ``server.server_address``), not yet
    serving: call ``serve_forever`` (on a thread for a test) and ``shutdown``/``server_close`` to
    stop. Raises ``OSError`` when the port is taken."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            try:
                length = int(self.headers.get("content-length") or 0)
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY_BYTES:
                self._answer(413)
                self.close_connection = True
                return
            body = self.rfile.read(length)
            current: Optional[Receiver] = getattr(self.server, "receiver", None)
            self._answer(503 if current is None else current.receive(body, dict(self.headers.items())))

        def do_GET(self) -> None:  # noqa: N802
            self._answer(404)

        def _answer(self, status: int) -> None:
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass  # one line per event is printed by the listener; no access log

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    server.receiver = receiver  # type: ignore[attr-defined]
    return server


def record_path(data_dir: Path) -> Path:
    """Where a background listener's record lives (in the dev data directory)."""
    return data_dir / "webhook-listener.json"


def write_record(path: Path, record: ListenerRecord) -> None:
    """Write ``record`` atomically (readers never see half a file); owner-only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(record.model_dump_json(indent=2))
    partial.replace(path)


def read_record(path: Path) -> Optional[ListenerRecord]:
    """The record at ``path`` if its process is alive, else None (none, unreadable, stale)."""
    from starter.dev.state import alive

    try:
        record = ListenerRecord.model_validate(json.loads(path.read_text()))
    except (OSError, ValueError, ValidationError):
        return None
    return record if alive(record.pid) else None


def now() -> datetime:
    """The current UTC time (a record's ``started_at``)."""
    return datetime.now(timezone.utc)
