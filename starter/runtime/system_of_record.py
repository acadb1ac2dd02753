"""Which system of record a worker serves, as a fingerprint other processes can compare.

Every worker of a task queue must write to the same database: a worker on another database
would confirm a cancel in the wrong system of record, silently. The worker's Temporal identity
carries a fingerprint of its database (``worker_identity``), which ``starter.runtime.preflight`` reads
back from the queue's pollers before a new worker starts.

Every worker of a task queue must also reach the same external services (payments, email,
ticketing): a worker started without the payments URL would skip the payments mirror of the
refunds it runs, silently. The identity carries ``svc:<flags><hash>`` too
(``services_fingerprint``: which services are configured, in clear, and a hash of where).

The fingerprint is a hash of the database's identity, never the URL itself: a URL may hold
a password. The password is left out of the hash too (it does not name the database), and a
SQLite file is named by its absolute path on this host (the same path on two machines is
two databases).
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
from pathlib import Path
from typing import Mapping, Optional
from urllib.parse import urlsplit

from sqlalchemy.engine import make_url

FINGERPRINT_LENGTH = 16
"""Hex characters kept of the SHA-256 (64 bits: collisions between a handful of databases are
not a concern; it identifies, it does not protect)."""
_MARK = "sor:"
_IN_IDENTITY = re.compile(rf"\b{_MARK}([0-9a-f]{{{FINGERPRINT_LENGTH}}})\b", re.ASCII)


def database_identity(database_url: str) -> str:
    """A canonical name of the database ``database_url`` points at, without its password.

    SQLite: ``sqlite:<host>:<absolute file path>`` (a relative path is resolved against the
    current directory, as SQLAlchemy would open it); an in-memory SQLite database is private
    to its process, so its identity names the process. Other backends:
    ``<backend>://<user>@<host>:<port>/<database>`` (the driver is left out: ``postgresql+psycopg``
    and ``postgresql`` reach the same database). Raises ``sqlalchemy.exc.ArgumentError`` for a
    URL SQLAlchemy cannot parse.
    """
    url = make_url(database_url)
    backend = url.get_backend_name()
    if backend == "sqlite":
        where = url.database or ""
        if where in ("", ":memory:") or where.startswith("file::memory:"):
            return f"sqlite-memory:{socket.gethostname()}:{os.getpid()}"
        return f"sqlite:{socket.gethostname()}:{Path(where).expanduser().resolve()}"
    return f"{backend}://{url.username or ''}@{url.host or ''}:{url.port or ''}/{url.database or ''}"


def fingerprint(database_url: str) -> str:
    """The system-of-record fingerprint of ``database_url``: 16 hex characters of the SHA-256
    of ``database_identity`` (no password, no URL)."""
    return hashlib.sha256(database_identity(database_url).encode()).hexdigest()[:FINGERPRINT_LENGTH]


SERVICES = ("payments", "email", "ticketing")
"""The external services a worker may be configured with (``Settings.<name>_url``)."""
_SVC_MARK = "svc:"
_SVC_IN_IDENTITY = re.compile(rf"\b{_SVC_MARK}([pet-]{{3}}[0-9a-f]{{12}})\b", re.ASCII)


def _service_identity(url: Optional[str]) -> str:
    """Where a service is reached, without credentials, path case or a trailing slash."""
    if not url:
        return ""
    parts = urlsplit(url.strip())
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower(), 0)
    return f"{parts.scheme.lower()}://{(parts.hostname or '').lower()}:{port}{parts.path.rstrip('/')}"


def services_fingerprint(urls: Mapping[str, Optional[str]]) -> str:
    """The services fingerprint of ``urls`` ({service name: base URL or None}): one character
    per service of ``SERVICES`` (its initial when configured, ``-`` when not), then 12 hex
    characters of the SHA-256 of where each is reached (no credentials)."""
    flags = "".join(name[0] if urls.get(name) else "-" for name in SERVICES)
    where = "|".join(_service_identity(urls.get(name)) for name in SERVICES)
    return flags + hashlib.sha256(where.encode()).hexdigest()[:12]


def services_in_identity(identity: str) -> Optional[str]:
    """The services fingerprint a ``worker_identity`` carries; None for an older worker."""
    found = _SVC_IN_IDENTITY.search(identity)
    return found.group(1) if found else None


def services_difference(theirs: str, ours: str) -> str:
    """What differs between two services fingerprints, in words an operator can act on
    (which service one worker has and the other lacks; else that the URLs differ)."""
    said = []
    for i, name in enumerate(SERVICES):
        if theirs[i] != ours[i]:
            has, lacks = ("that worker", "this one") if theirs[i] != "-" else ("this worker", "that one")
            article = "an" if name[0] in "aeiou" else "a"
            said.append(f"{has} uses {article} {name} service and {lacks} has none (STATEKEEPER_{name.upper()}_URL)")
    return "; ".join(said) or "both use the same services at different URLs"


def worker_identity(db_fingerprint: str, services: Optional[str] = None) -> str:
    """The Temporal worker identity: the SDK's default ``pid@host`` plus ``sor:<fingerprint>``
    and, when given, ``svc:<services fingerprint>``."""
    extra = f" {_SVC_MARK}{services}" if services else ""
    return f"{os.getpid()}@{socket.gethostname()} statekeeper {_MARK}{db_fingerprint}{extra}"


def fingerprint_in_identity(identity: str) -> Optional[str]:
    """The fingerprint a ``worker_identity`` carries; None for a poller that is not a
    statekeeper worker of this kind (another SDK, an older version, the CLI)."""
    found = _IN_IDENTITY.search(identity)
    return found.group(1) if found else None
