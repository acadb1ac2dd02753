"""The shapes of ``settings.Settings``' values that a bare ``float``, ``int`` or ``str`` let
through, each a one-line ``invalid setting`` (``starter.cli.refusals.command_settings``)
instead of a failure later.

Why: ``STATEKEEPER_RPC_TIMEOUT_SECONDS=nan`` (or ``inf``, ``1e308``) ended every client command
with a ``ValueError``/``OverflowError`` traceback where the deadline was computed, ``-1`` was
reported as "Temporal is not reachable"; an empty ``STATEKEEPER_TASK_QUEUE`` was gRPC's
``RPCError: missing task queue name`` traceback; ``STATEKEEPER_TEMPORAL_ADDRESS`` without a
port a ``ValueError`` traceback; ``STATEKEEPER_MAX_CONCURRENT_WORKFLOW_TASKS=0`` started a
worker that never took a workflow task (every conversation waited for ever), and a huge one
a ``TypeError`` traceback from the SDK's worker config; a default tenant no API key can be made
for (``""``, ``ACME``) served the keyless API as a tenant nobody else could ever reach; a
``STATEKEEPER_DATABASE_URL`` or ``STATEKEEPER_JOURNAL_URL`` SQLAlchemy cannot parse, or of an
unknown dialect, ended ``statekeeper worker`` with an ``ArgumentError``/``NoSuchModuleError``
traceback; a ``STATEKEEPER_CODEC_CORS_ORIGINS`` entry that is no origin (``localhost:8233``,
``*``, a URL with a path) started a codec server no browser's Web UI could call.
Imports nothing heavy: ``settings`` (and so every process) loads it.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field

TENANT_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
"""A tenant name: lower-case ASCII letters, digits and ``._-``, at most 64 characters."""
TENANT_RULE = "a tenant is 1 to 64 lower-case letters, digits and ._- (starting with a letter or digit)"
MAX_WAIT_SECONDS = 86400.0
"""The longest client deadline or request timeout a setting takes (a day): beyond it the
deadline arithmetic overflowed (``inf``, ``1e308``)."""
MAX_SLOTS = 100_000
"""The most task slots (or cached workflows) a worker setting takes; the SDK refused larger ones
with a traceback (over 2**64), and far fewer already exhaust a machine."""


def _tenant(value: str) -> str:
    if not TENANT_PATTERN.fullmatch(value):
        raise ValueError(TENANT_RULE)
    return value


def _name(value: str) -> str:
    if not value.strip() or value != value.strip():
        raise ValueError("must not be empty or begin or end with a space")
    if any(ch < " " or ch == "\x7f" for ch in value):
        raise ValueError("must not hold a control character")
    return value


def _host_port(value: str) -> str:
    host, colon, port = value.rpartition(":")
    if not colon or not host.strip() or not port.isascii() or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError("must be host:port, e.g. 127.0.0.1:7233 (port 1-65535)")
    return _name(value)


def _http_url(value: str) -> str:
    try:
        parts = urlsplit(value.strip())
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a port that is not a number, a bad IPv6 address
        ok = False
    if not ok:
        raise ValueError("must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:4318")
    return value.strip()


def _origins(value: str) -> str:
    if not value.strip():
        return value  # blank: the embedded Web UI's origins, as when unset
    for origin in (entry.strip().rstrip("/") for entry in value.split(",") if entry.strip()):
        try:
            parts = urlsplit(origin)
            ok = (parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
                  and not parts.path and not parts.query and not parts.fragment and "@" not in parts.netloc)
        except ValueError:  # a port that is not a number, a bad IPv6 address
            ok = False
        if not ok:
            raise ValueError("must be comma-separated origins, each http(s)://host[:port], e.g. "
                             "https://temporal-ui.internal,http://localhost:8233")
    return value


def _database_url(value: str) -> str:
    if not value.strip():
        return value  # blank: the SQLite default in the data directory, as when unset
    # imported here: settings load this module in every process, and most set no URL
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    try:
        url = make_url(value)
        dialect = url.get_dialect()  # no connection is made
    except (SQLAlchemyError, ValueError):  # not a URL, an unknown dialect or driver, a bad port
        raise ValueError("must be a SQLAlchemy database URL, e.g. postgresql+psycopg://user:password@host:5432/name "
                         "or sqlite:////path/file.sqlite") from None
    try:
        dialect.import_dbapi()  # `postgresql://` means psycopg2, which is not installed: psycopg (3) is
    except ImportError:
        raise ValueError(f"its database driver ({url.drivername}) is not installed: name one that is, e.g. "
                         "postgresql+psycopg://... (psycopg 3) or sqlite:///...") from None
    return value


Seconds = Annotated[float, Field(gt=0, le=MAX_WAIT_SECONDS, allow_inf_nan=False)]
"""A deadline or timeout: above 0, at most a day (``nan`` and ``inf`` are refused)."""
Slots = Annotated[int, Field(ge=1, le=MAX_SLOTS)]
"""A worker's task slots: at least 1 (0 took no task at all)."""
Tenant = Annotated[str, AfterValidator(_tenant)]
"""A tenant name, as ``statekeeper keys create --tenant`` takes it."""
Name = Annotated[str, Field(max_length=1000), AfterValidator(_name)]
"""A name sent to Temporal or the model (task queue, namespace, model id): not blank."""
HostPort = Annotated[str, AfterValidator(_host_port)]
"""A ``host:port`` address."""
HttpUrl = Annotated[str, AfterValidator(_http_url)]
"""An ``http(s)://host[:port][/path]`` URL."""
Origins = Annotated[str, AfterValidator(_origins)]
"""Comma-separated web origins (``scheme://host[:port]``), as a browser sends ``Origin``."""
DatabaseUrl = Annotated[str, AfterValidator(_database_url)]
"""A SQLAlchemy URL whose dialect (and driver name) SQLAlchemy knows; blank is the default."""


MemoryKind = Literal["refund_method", "delivery_instructions", "preferred_language", "open_complaint"]
"""The kinds of remembered facts (``workflows.domain.memory.FactKind``; a test holds them equal)."""
RetentionDays = Annotated[int, Field(ge=1, le=36_500)]
"""A retention period in days: at least a day, at most a hundred years (a later expiry would pass
the largest date the database keeps)."""
