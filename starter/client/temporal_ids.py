"""Ids the client sends Temporal, within Temporal's length limit.

Temporal refuses a workflow id or an update id over ``limit.maxIDLength`` bytes (1000 by
default) with ``INVALID_ARGUMENT``, an answer the client took for an unreachable server
("Temporal is not reachable; retry later", a 503 over HTTP): a caller retried for ever a
request that could never be served. So a caller's id that would make one too long is refused
before anything is sent (``too_long``), an id naming a process that cannot exist is
``not_found`` (``fits``), and an update id built from several caller-chosen parts (an
approval id, an approver, a step id) that would be too long is hashed instead
(``update_id``), so a long but valid conversation id still has decidable approvals.
"""

from __future__ import annotations

import hashlib
from typing import Optional

MAX_ID_BYTES = 1000
"""Temporal's default ``limit.maxIDLength``: the most UTF-8 bytes of a workflow or update id."""


def fits(temporal_id: str) -> bool:
    """True when ``temporal_id`` is a workflow or update id Temporal can hold (1 to
    ``MAX_ID_BYTES`` bytes)."""
    return 0 < len(temporal_id.encode("utf-8", "surrogatepass")) <= MAX_ID_BYTES


def too_long(value: str, prefix: str, what: str) -> Optional[str]:
    """Why the caller's id ``value`` is refused when ``prefix + value`` (the workflow or
    update id it becomes) is over Temporal's limit, or None. Names the sizes, not the id."""
    room = MAX_ID_BYTES - len(prefix.encode())
    size = len(value.encode("utf-8", "surrogatepass"))
    if size <= room:
        return None
    return f"{what} is {size} bytes; the limit is {room} bytes"


def update_id(prefix: str, *parts: str) -> str:
    """``<prefix>-<part>-<part>...``, the same for the same parts (a retry is deduplicated),
    or ``<prefix>-h<sha256 of the parts>`` when that would be over Temporal's limit."""
    plain = "-".join((prefix, *parts))
    if fits(plain):
        return plain
    digest = hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()
    return f"{prefix}-h{digest}"
