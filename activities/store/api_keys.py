"""API keys of the HTTP API: one per calling service, bound to a tenant and a role
(``service`` or ``operator``), a service key optionally scoped to one customer. Kept in our
own journal database (table ``api_keys``), never in the clear.

A key is ``sk_<key id>_<secret>``: the key id (12 hex characters) is public — it names the
key in ``keys list``, ``keys revoke`` and as the actor of audit entries; the secret is 256
random bits (``secrets.token_urlsafe(32)``). The table holds ``HMAC-SHA256(server secret,
key id ":" secret)``, compared in constant time (``hmac.compare_digest``).

Why HMAC-SHA256 and not a slow KDF (scrypt, PBKDF2): a slow KDF protects guessable
passwords; these secrets are 256 random bits, which no stolen digest lets anyone guess, while
a KDF would cost every API request tens of milliseconds of CPU and memory (a lever for
denial of service). The server secret (``Settings.api_key_hmac_secret``) adds what a plain
hash lacks: someone who can read or write the database alone can neither check a guess nor
insert a working key. Both come from the standard library (``hmac``, ``hashlib``, ``secrets``).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime, timezone
from enum import Enum
from typing import Optional

import sqlalchemy as sa
from pydantic import BaseModel

from activities.store.tables import create_schema, make_engine
from settings.types import TENANT_PATTERN, TENANT_RULE
from workflows.domain.user_text import control_problem

metadata = sa.MetaData()

MAX_LABEL = 200
"""The longest key label kept (a longer one is refused, never cut)."""
MAX_REQUESTS_PER_MINUTE = 1_000_000
"""The highest per-key rate limit a key may be given (requests a minute)."""

api_keys = sa.Table(
    "api_keys", metadata,
    sa.Column("key_id", sa.String(12), primary_key=True),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("tenant", sa.String(64), nullable=False, index=True),
    sa.Column("role", sa.String(20), nullable=False),
    sa.Column("customer", sa.String(64), nullable=True),
    sa.Column("label", sa.String(MAX_LABEL), nullable=False, default=""),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("requests_per_minute", sa.Integer, nullable=True),
)

KEY_PATTERN = re.compile(r"^sk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
"""A presented key: ``sk_``, the key id, ``_``, the 43-character URL-safe secret."""


class Role(str, Enum):
    """``service``: a backend of the tenant; ``operator``: its supervisors (README, "API access")."""

    SERVICE = "service"
    OPERATOR = "operator"


class ApiKey(BaseModel):
    """A key's record (never its secret). ``customer`` is the ``CustomerId`` pseudonym of the
    one customer a scoped service key may act for (None: the whole tenant)."""

    key_id: str
    tenant: str
    role: Role
    customer: Optional[str] = None
    label: str = ""
    created_at: datetime
    revoked_at: Optional[datetime] = None
    requests_per_minute: Optional[int] = None
    """The key's own request rate limit (requests a minute); None: the API's default
    (``Settings.api_requests_per_minute``)."""

    @property
    def active(self) -> bool:
        """False once revoked."""
        return self.revoked_at is None


def _utc(value: Optional[datetime]) -> Optional[datetime]:
    # SQLite hands back naive datetimes: they were stored as UTC
    if value is None:
        return None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def check_tenant(tenant: str) -> str:
    """``tenant`` if it is a valid tenant name; else ``ValueError`` saying what one is."""
    if not TENANT_PATTERN.fullmatch(tenant):
        raise ValueError(TENANT_RULE)
    return tenant


class KeyStore:
    """The API keys at SQLAlchemy ``url`` (tables migrated to the newest schema if needed), digested with ``secret``
    (the server secret; raises ``ValueError`` if empty). Thread-safe; each call is one
    transaction; database failures raise ``sqlalchemy.exc.SQLAlchemyError``."""

    def __init__(self, url: str, secret: str) -> None:
        if not secret:
            raise ValueError("the API keys' server secret is empty")
        self._secret = secret.encode("utf-8")
        self.engine = make_engine(url)
        create_schema(self.engine)  # the journal database's migrations (activities.store.migrate)

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    def _digest(self, key_id: str, secret: str) -> str:
        return hmac.new(self._secret, f"{key_id}:{secret}".encode("ascii"), hashlib.sha256).hexdigest()

    def create(self, tenant: str, role: Role, customer: Optional[str] = None, label: str = "",
               requests_per_minute: Optional[int] = None) -> tuple[ApiKey, str]:
        """Make a key; returns its record and the key text, which is shown once and kept
        nowhere. ``requests_per_minute``: its own rate limit (None: the API's default).
        Raises ``ValueError`` for a rate limit below 1, a bad tenant, a label the table cannot keep whole or
        that holds a control character (``keys list`` shows it to operators: an escape sequence
        would reach their terminal), or a customer scope on an operator key."""
        check_tenant(tenant)
        if requests_per_minute is not None and not 1 <= requests_per_minute <= MAX_REQUESTS_PER_MINUTE:
            raise ValueError(f"a key's rate limit is 1 to {MAX_REQUESTS_PER_MINUTE} requests a minute")
        if len(label) > MAX_LABEL:
            raise ValueError(f"a label is at most {MAX_LABEL} characters (this one has {len(label)})")
        problem = control_problem(label, "the label")
        if problem is not None:
            raise ValueError(problem)
        role = Role(role)
        if customer is not None and role is not Role.SERVICE:
            raise ValueError("only a service key can be scoped to a customer")
        key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        record = ApiKey(key_id=key_id, tenant=tenant, role=role, customer=customer, label=label,
                        created_at=datetime.now(timezone.utc), requests_per_minute=requests_per_minute)
        with self.engine.begin() as conn:
            conn.execute(api_keys.insert().values(digest=self._digest(key_id, secret),
                                                  **record.model_dump(exclude={"revoked_at"}, mode="python")))
        return record, f"sk_{key_id}_{secret}"

    def verify(self, presented: str) -> Optional[ApiKey]:
        """The active key ``presented`` is, or None (malformed, unknown, wrong secret, revoked)."""
        match = KEY_PATTERN.fullmatch(presented or "")
        if match is None:
            return None
        key_id, secret = match.groups()
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(api_keys).where(api_keys.c.key_id == key_id)).mappings().first()
        expected = row["digest"] if row is not None else "0" * 64
        # computed and compared whether or not the id exists: the answer's timing says nothing
        if not hmac.compare_digest(expected, self._digest(key_id, secret)) or row is None:
            return None
        record = self._record(row)
        return record if record.active else None

    def active_key(self, key_id: str) -> Optional[ApiKey]:
        """The record of the active key ``key_id``, or None (unknown or revoked). For a caller
        who proved the key once and holds a signed session naming it (``starter.api.inbox``)."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(api_keys).where(api_keys.c.key_id == key_id)).mappings().first()
        record = self._record(row) if row is not None else None
        return record if record is not None and record.active else None

    def derived_secret(self, purpose: str) -> bytes:
        """A secret for ``purpose`` (e.g. signing sessions) derived from the server secret:
        ``HMAC-SHA256(server secret, purpose)``; one server secret to keep, none to derive back."""
        return hmac.new(self._secret, f"statekeeper:{purpose}".encode("utf-8"), hashlib.sha256).digest()

    def keys(self, include_revoked: bool = False) -> list[ApiKey]:
        """Every key, oldest first (revoked ones only with ``include_revoked``)."""
        query = sa.select(api_keys).order_by(api_keys.c.created_at, api_keys.c.key_id)
        if not include_revoked:
            query = query.where(api_keys.c.revoked_at.is_(None))
        with self.engine.connect() as conn:
            return [self._record(row) for row in conn.execute(query).mappings()]

    def revoke(self, key_id: str) -> bool:
        """Revoke key ``key_id`` at once (its record stays, for the audit log's actors);
        False if there is no such active key."""
        with self.engine.begin() as conn:
            result = conn.execute(api_keys.update().where(api_keys.c.key_id == key_id, api_keys.c.revoked_at.is_(None))
                                  .values(revoked_at=datetime.now(timezone.utc)))
        return result.rowcount == 1

    def active_count(self) -> int:
        """How many keys are not revoked: with none, no API may listen beyond loopback."""
        with self.engine.connect() as conn:
            return conn.execute(sa.select(sa.func.count()).select_from(api_keys)
                                .where(api_keys.c.revoked_at.is_(None))).scalar_one()

    @staticmethod
    def _record(row: sa.RowMapping) -> ApiKey:
        fields = {k: row[k] for k in ApiKey.model_fields}
        return ApiKey(**{**fields, "created_at": _utc(row["created_at"]), "revoked_at": _utc(row["revoked_at"])})
