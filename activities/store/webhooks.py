"""Webhook subscriptions and their deliveries, in statekeeper's own database (the journal's;
revision 0006): ``webhooks`` (one row per subscription: tenant, URL, event types, sealed
signing secret) and ``webhook_deliveries`` (one row per event and subscription: the outbox of
the delivery workflows, and what each delivery did).

The outbox: ``enqueue`` runs inside the transaction that stores a conversation's new events
(``activities.store.journal.JournalStore``), so every stored event has its delivery rows the
moment it exists, and none exists for an event that was not stored. A delivery row is then
*started* (``started_at``) once its Temporal workflow exists (``activities.webhooks.starts``):
right after the commit, and by the sweep for any row a crash left unstarted.

A delivery is named by its subscription and its event: ``(webhook_id, event_id)``; the API
calls the event id the delivery id (``delivery_id``), so a redelivery keeps it.

Secrets are Standard Webhooks secrets (``whsec_`` + base64 of 24 random bytes). They are kept
sealed with the payload codec's current AES-GCM key when one is given (``SecretSeal``; the
webhook id is the associated data, so a sealed secret moved to another row does not open),
else as they are (``plain:``): see docs/webhooks.md. Times are UTC; every method is one
transaction and raises ``sqlalchemy.exc.SQLAlchemyError`` when the database fails.
"""

from __future__ import annotations

import base64
import os
import secrets
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Any, Iterable, Mapping, Optional

import sqlalchemy as sa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import BaseModel
from sqlalchemy.engine import Connection

from activities.store.tables import ID, TIME, create_schema, events, make_engine, refund_events

metadata = sa.MetaData()

MAX_URL = 2048
"""The longest webhook URL kept (2 KB); a longer one is refused, never cut."""
MAX_DESCRIPTION = 500
MAX_EVENT_TYPES = 64
ALL_EVENTS = "*"
"""The event type that subscribes to every type, those added later included."""

webhooks = sa.Table(
    "webhooks", metadata,
    sa.Column("webhook_id", sa.String(40), primary_key=True),
    sa.Column("tenant", sa.String(64), nullable=False, index=True),
    sa.Column("url", sa.String(MAX_URL), nullable=False),
    sa.Column("event_types", sa.JSON, nullable=False),
    sa.Column("description", sa.String(MAX_DESCRIPTION), nullable=False, default=""),
    sa.Column("secret", sa.String(300), nullable=False),
    sa.Column("created_at", TIME, nullable=False),
)
"""One row per subscription; ``event_types`` a JSON list of ``EventType`` values or ``["*"]``."""

webhook_deliveries = sa.Table(
    "webhook_deliveries", metadata,
    sa.Column("webhook_id", sa.String(40), primary_key=True),
    sa.Column("event_id", sa.String(40), primary_key=True),
    sa.Column("tenant", sa.String(64), nullable=False),
    sa.Column("conversation_id", ID, nullable=True, index=True),
    sa.Column("refund_id", ID, nullable=True, index=True),
    sa.Column("sequence", sa.Integer, nullable=False),
    sa.Column("event_type", sa.String(50), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("last_status_code", sa.Integer, nullable=True),
    sa.Column("last_error", sa.String(200), nullable=True),
    sa.Column("created_at", TIME, nullable=False),
    sa.Column("started_at", TIME, nullable=True, index=True),
    sa.Column("last_attempt_at", TIME, nullable=True),
    sa.Column("finished_at", TIME, nullable=True),
)
"""One row per (subscription, event): the outbox row and what its delivery did."""


class DeliveryStatus(str, Enum):
    """Where a delivery stands."""

    PENDING = "pending"
    """Not delivered yet: waiting for its workflow, or between attempts."""
    DELIVERED = "delivered"
    """The receiver answered 2xx."""
    FAILED = "failed"
    """Its retries ran out (or it cannot be sent: its event was erased); ``retry`` sends it again."""


class Webhook(BaseModel):
    """A subscription as listed (never its secret)."""

    webhook_id: str
    tenant: str
    url: str
    events: list[str]
    description: str = ""
    created_at: datetime


class Delivery(BaseModel):
    """One delivery: event ``delivery_id`` (the event's id, the ``webhook-id`` header) of
    conversation ``conversation_id``, or of refund ``refund_id``, to subscription ``webhook_id``. ``attempts``: requests
    sent so far; ``last_status_code``: the receiver's last HTTP status (None: no answer);
    ``last_error``: what went wrong last, in a few words (None after a success)."""

    webhook_id: str
    delivery_id: str
    event_type: str
    conversation_id: Optional[str] = None
    refund_id: Optional[str] = None
    sequence: int
    status: DeliveryStatus
    attempts: int = 0
    last_status_code: Optional[int] = None
    last_error: Optional[str] = None
    created_at: datetime
    started_at: Optional[datetime] = None
    last_attempt_at: Optional[datetime] = None
    finished_at: Optional[datetime] = None


class Target(BaseModel):
    """What one attempt needs: the subscription's URL and (opened) secret, and the event's
    row (``activities.store.journal`` ``events``: id, type, time, sequence, data)."""

    url: str
    secret: str
    event_id: str
    event_type: str
    at: datetime
    sequence: int
    data: dict[str, Any]


def _utc(value: Optional[datetime]) -> Optional[datetime]:
    # SQLite hands back naive datetimes: they were stored as UTC
    if value is None:
        return None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def new_secret() -> str:
    """A Standard Webhooks signing secret: ``whsec_`` + base64 of 24 random bytes (192 bits)."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode("ascii")


class SecretSeal:
    """Seals secrets with AES-GCM under ``keys[current]`` (``keys``: key id → 16/24/32-byte
    AES key; the payload codec's keyring, ``starter.runtime.codec``); every listed key opens.
    ``SecretSeal(None)``: secrets are kept as they are (the codec is off)."""

    def __init__(self, keys: Optional[Mapping[str, bytes]], current: Optional[str] = None) -> None:
        self._keys = dict(keys or {})
        self._current = current if current is not None else next(iter(self._keys), None)

    def seal(self, webhook_id: str, secret: str) -> str:
        """``aesgcm:<key id>:<base64(nonce || ciphertext)>``, or ``plain:<secret>`` without keys."""
        if self._current is None:
            return f"plain:{secret}"
        nonce = os.urandom(12)
        sealed = AESGCM(self._keys[self._current]).encrypt(nonce, secret.encode(), webhook_id.encode())
        return f"aesgcm:{self._current}:{base64.b64encode(nonce + sealed).decode('ascii')}"

    def open(self, webhook_id: str, stored: str) -> str:
        """The secret ``stored`` holds. Raises ``ValueError`` when its key is not known here
        or it does not open (tampered, or moved from another row)."""
        kind, _, rest = stored.partition(":")
        if kind == "plain":
            return rest
        key_id, _, blob = rest.partition(":")
        if kind != "aesgcm" or key_id not in self._keys:
            raise ValueError("a webhook's secret is sealed with a key this process does not have")
        raw = base64.b64decode(blob)
        try:
            return AESGCM(self._keys[key_id]).decrypt(raw[:12], raw[12:], webhook_id.encode()).decode()
        except Exception as err:  # noqa: BLE001 (InvalidTag: the message names no key)
            raise ValueError("a webhook's secret does not open with its key") from err


def matches(event_types: Iterable[str], event_type: str) -> bool:
    """Whether a subscription to ``event_types`` receives an event of ``event_type``."""
    types = set(event_types)
    return ALL_EVENTS in types or event_type in types


def enqueue(conn: Connection, tenant: str, process: dict[str, str], events: list[dict[str, Any]],
            now: Optional[datetime] = None) -> list[tuple[str, str]]:
    """Insert a pending delivery row for each of ``events`` (rows just inserted into the
    ``events`` table, ``process`` ``{"conversation_id": id}``, or into ``refund_events``,
    ``{"refund_id": id}``: ``event_id``, ``type``, ``sequence``) and each subscription of ``tenant`` that
    takes its type, on ``conn`` (the caller's transaction). Returns the (webhook id, event id)
    of the rows made. An event is inserted once (its store keeps the first), so each
    (subscription, event) pair is enqueued once."""
    if not events:
        return []
    subscriptions = conn.execute(sa.select(webhooks.c.webhook_id, webhooks.c.event_types).where(
        webhooks.c.tenant == tenant)).all()
    if not subscriptions:
        return []
    now = now or datetime.now(timezone.utc)
    rows = [{"webhook_id": webhook_id, "event_id": e["event_id"], "tenant": tenant, **process,
             "sequence": e["sequence"], "event_type": e["type"], "status": DeliveryStatus.PENDING.value,
             "attempts": 0, "created_at": now}
            for e in events for webhook_id, types in subscriptions if matches(types or [], e["type"])]
    if rows:
        conn.execute(sa.insert(webhook_deliveries), rows)
    return [(r["webhook_id"], r["event_id"]) for r in rows]


def erase_deliveries(conn: Connection, conversation_ids: list[str] = (), refund_ids: list[str] = ()) -> int:
    """Remove the delivery rows of ``conversation_ids`` and ``refund_ids`` (erasure and retention
    remove a process's events, and its deliveries go with them); returns how many."""
    d = webhook_deliveries.c
    return conn.execute(sa.delete(webhook_deliveries).where(sa.or_(
        d.conversation_id.in_(list(conversation_ids)), d.refund_id.in_(list(refund_ids))))).rowcount or 0


class WebhookStore:
    """The subscriptions and deliveries at SQLAlchemy ``url`` (schema migrated to the newest
    on first use), their secrets sealed by ``seal``. Thread-safe."""

    def __init__(self, url: str, seal: Optional[SecretSeal] = None) -> None:
        self.engine = make_engine(url)
        self.seal = seal or SecretSeal(None)
        self._ready = False

    def _engine(self) -> sa.engine.Engine:
        if not self._ready:
            create_schema(self.engine)
            self._ready = True
        return self.engine

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    # --- subscriptions ---------------------------------------------------------------

    def create(self, tenant: str, url: str, events: list[str], description: str = "") -> tuple[Webhook, str]:
        """Store a subscription; returns it and its secret (shown once: it is kept sealed).
        The caller has checked ``url`` and ``events`` (``activities.webhooks.addresses``,
        ``starter.client.webhooks``). Raises ``ValueError`` for a URL or description longer
        than the table keeps or no event type."""
        if len(url) > MAX_URL or len(description) > MAX_DESCRIPTION or not events or len(events) > MAX_EVENT_TYPES:
            raise ValueError("a webhook's URL, description or event types are out of bounds")
        webhook_id, secret = f"wh_{secrets.token_hex(12)}", new_secret()
        record = Webhook(webhook_id=webhook_id, tenant=tenant, url=url, events=list(dict.fromkeys(events)),
                         description=description, created_at=datetime.now(timezone.utc))
        with self._engine().begin() as conn:
            conn.execute(sa.insert(webhooks).values(
                webhook_id=webhook_id, tenant=tenant, url=url, event_types=record.events, description=description,
                secret=self.seal.seal(webhook_id, secret), created_at=record.created_at))
        return record, secret

    def list(self, tenant: str) -> list[Webhook]:
        """``tenant``'s subscriptions, oldest first."""
        w = webhooks.c
        with self._engine().connect() as conn:
            rows = conn.execute(sa.select(webhooks).where(w.tenant == tenant).order_by(w.created_at, w.webhook_id))
            return [self._webhook(r) for r in rows.mappings()]

    def get(self, tenant: str, webhook_id: str) -> Optional[Webhook]:
        """``tenant``'s subscription ``webhook_id``; None for none (or another tenant's)."""
        w = webhooks.c
        with self._engine().connect() as conn:
            row = conn.execute(sa.select(webhooks).where(w.tenant == tenant, w.webhook_id == webhook_id)).mappings().first()
        return self._webhook(row) if row is not None else None

    def delete(self, tenant: str, webhook_id: str) -> bool:
        """Remove ``tenant``'s subscription ``webhook_id`` and its deliveries (their workflows
        stop at their next attempt); False if there is none."""
        w, d = webhooks.c, webhook_deliveries.c
        with self._engine().begin() as conn:
            gone = conn.execute(sa.delete(webhooks).where(w.tenant == tenant, w.webhook_id == webhook_id)).rowcount
            if gone:
                conn.execute(sa.delete(webhook_deliveries).where(d.webhook_id == webhook_id))
        return bool(gone)

    @staticmethod
    def _webhook(row: Any) -> Webhook:
        return Webhook(webhook_id=row["webhook_id"], tenant=row["tenant"], url=row["url"],
                       events=list(row["event_types"] or []), description=row["description"] or "",
                       created_at=_utc(row["created_at"]))

    # --- deliveries ------------------------------------------------------------------

    def deliveries(self, tenant: str, webhook_id: str, status: Optional[DeliveryStatus] = None,
                   limit: int = 100) -> list[Delivery]:
        """The newest ``limit`` deliveries of ``tenant``'s subscription ``webhook_id``
        (newest first), only those in ``status`` if given; [] for none."""
        d = webhook_deliveries.c
        query = sa.select(webhook_deliveries).where(d.tenant == tenant, d.webhook_id == webhook_id)
        if status is not None:
            query = query.where(d.status == status.value)
        query = query.order_by(d.created_at.desc(), d.conversation_id, d.sequence.desc()).limit(limit)
        with self._engine().connect() as conn:
            return [self._delivery(r) for r in conn.execute(query).mappings()]

    def delivery(self, tenant: Optional[str], webhook_id: str, event_id: str) -> Optional[Delivery]:
        """Delivery ``event_id`` of subscription ``webhook_id`` (of ``tenant``, unless None); None if none."""
        d = webhook_deliveries.c
        query = sa.select(webhook_deliveries).where(d.webhook_id == webhook_id, d.event_id == event_id)
        if tenant is not None:
            query = query.where(d.tenant == tenant)
        with self._engine().connect() as conn:
            row = conn.execute(query).mappings().first()
        return self._delivery(row) if row is not None else None

    @staticmethod
    def _delivery(row: Any) -> Delivery:
        return Delivery(webhook_id=row["webhook_id"], delivery_id=row["event_id"], event_type=row["event_type"],
                        conversation_id=row["conversation_id"], refund_id=row["refund_id"], sequence=row["sequence"],
                        status=DeliveryStatus(row["status"]), attempts=row["attempts"] or 0,
                        last_status_code=row["last_status_code"], last_error=row["last_error"],
                        created_at=_utc(row["created_at"]), started_at=_utc(row["started_at"]),
                        last_attempt_at=_utc(row["last_attempt_at"]), finished_at=_utc(row["finished_at"]))

    def target(self, webhook_id: str, event_id: str) -> Optional[Target]:
        """What an attempt of delivery (``webhook_id``, ``event_id``) sends, read now (the
        subscription may have been deleted, the event erased): None when either is gone.
        Raises ``ValueError`` when the secret does not open (``SecretSeal.open``)."""
        w, d = webhooks.c, webhook_deliveries.c
        row = None
        with self._engine().connect() as conn:
            for table, process in ((events, "conversation_id"), (refund_events, "refund_id")):
                e = table.c
                query = sa.select(w.url, w.secret, e.event_id, e.type, e.at, e.sequence, e.data).select_from(
                    webhook_deliveries.join(webhooks, w.webhook_id == d.webhook_id).join(
                        table, sa.and_(e[process] == d[process], e.sequence == d.sequence))
                ).where(d.webhook_id == webhook_id, d.event_id == event_id)
                row = conn.execute(query).mappings().first()
                if row is not None:
                    break
        if row is None or row["event_id"] != event_id:
            return None
        return Target(url=row["url"], secret=self.seal.open(webhook_id, row["secret"]), event_id=row["event_id"],
                      event_type=row["type"], at=_utc(row["at"]), sequence=row["sequence"], data=row["data"])

    def attempted(self, webhook_id: str, event_id: str, status_code: Optional[int], error: Optional[str]) -> None:
        """Record one attempt: the receiver's status (None: no answer) and what went wrong
        (None: it was delivered, 2xx)."""
        now = datetime.now(timezone.utc)
        values: dict[str, Any] = {"attempts": webhook_deliveries.c.attempts + 1, "last_status_code": status_code,
                                  "last_error": error[:200] if error else None, "last_attempt_at": now}
        if error is None:
            values.update(status=DeliveryStatus.DELIVERED.value, finished_at=now)
        self._update(webhook_id, event_id, values)

    def failed(self, webhook_id: str, event_id: str, error: Optional[str] = None) -> None:
        """Mark the delivery failed (its retries ran out); ``error`` replaces the last error when given."""
        values: dict[str, Any] = {"status": DeliveryStatus.FAILED.value, "finished_at": datetime.now(timezone.utc)}
        if error:
            values["last_error"] = error[:200]
        self._update(webhook_id, event_id, values)

    def set_status(self, webhook_id: str, event_id: str, status: DeliveryStatus,
                   finished_at: Optional[datetime]) -> None:
        """Put the delivery's status (and when it finished) back to what it was (a manual retry
        that Temporal did not take)."""
        self._update(webhook_id, event_id, {"status": status.value, "finished_at": finished_at})

    def _update(self, webhook_id: str, event_id: str, values: dict[str, Any]) -> None:
        d = webhook_deliveries.c
        with self._engine().begin() as conn:
            conn.execute(sa.update(webhook_deliveries).where(d.webhook_id == webhook_id, d.event_id == event_id)
                         .values(**values))

    def status_counts(self, webhook_id: str, conversation_prefix: str) -> dict[str, int]:
        """How many deliveries of subscription ``webhook_id`` to conversations whose id starts
        with ``conversation_prefix`` are in each status (``DeliveryStatus`` values; a status
        with none is absent)."""
        d = webhook_deliveries.c
        query = sa.select(d.status, sa.func.count()).where(
            d.webhook_id == webhook_id, d.conversation_id.startswith(conversation_prefix, autoescape=True)
        ).group_by(d.status)
        with self._engine().connect() as conn:
            return {status: count for status, count in conn.execute(query).all()}

    # --- the outbox --------------------------------------------------------------------

    def unstarted(self, older_than: timedelta = timedelta(0), limit: int = 500) -> list[tuple[str, str]]:
        """(webhook id, event id) of up to ``limit`` delivery rows whose workflow has not been
        started, made at least ``older_than`` ago, oldest first (what the sweep starts)."""
        d = webhook_deliveries.c
        cutoff = datetime.now(timezone.utc) - older_than
        query = sa.select(d.webhook_id, d.event_id).where(d.started_at.is_(None), d.created_at <= cutoff).order_by(
            d.created_at).limit(limit)
        with self._engine().connect() as conn:
            return [tuple(r) for r in conn.execute(query).all()]

    def started(self, keys: list[tuple[str, str]]) -> None:
        """Note that the workflows of the deliveries ``keys`` exist."""
        if not keys:
            return
        d, now = webhook_deliveries.c, datetime.now(timezone.utc)
        with self._engine().begin() as conn:
            for webhook_id, event_id in keys:
                conn.execute(sa.update(webhook_deliveries).where(
                    d.webhook_id == webhook_id, d.event_id == event_id, d.started_at.is_(None)).values(started_at=now))

    def reopen(self, tenant: str, webhook_id: str, event_id: str) -> Optional[Delivery]:
        """Set a delivery of ``tenant`` pending again (a manual retry; attempts are kept);
        returns it, or None when there is none."""
        d = webhook_deliveries.c
        with self._engine().begin() as conn:
            changed = conn.execute(sa.update(webhook_deliveries).where(
                d.tenant == tenant, d.webhook_id == webhook_id, d.event_id == event_id).values(
                status=DeliveryStatus.PENDING.value, finished_at=None)).rowcount
        return self.delivery(tenant, webhook_id, event_id) if changed else None
