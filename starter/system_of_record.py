"""Which system of record a worker serves, as a fingerprint other processes can compare.

Every worker of a task queue must write to the same database: a worker on another database
would confirm a cancel in the wrong system of record, silently. The worker's Temporal identity
carries a fingerprint of its database (``worker_identity``), which ``starter.preflight`` reads
back from the queue's pollers before a new worker starts.

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
from typing import Optional

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


def worker_identity(db_fingerprint: str) -> str:
    """The Temporal worker identity: the SDK's default ``pid@host`` plus ``sor:<fingerprint>``."""
    return f"{os.getpid()}@{socket.gethostname()} statekeeper {_MARK}{db_fingerprint}"


def fingerprint_in_identity(identity: str) -> Optional[str]:
    """The fingerprint a ``worker_identity`` carries; None for a poller that is not a
    statekeeper worker of this kind (another SDK, an older version, the CLI)."""
    found = _IN_IDENTITY.search(identity)
    return found.group(1) if found else None
