"""Facts remembered about a customer across conversations: their kinds, their shape, their
identity and their expiry.

A fact is one of a closed set of kinds (``FactKind``), scoped to a tenant, a store and a
customer (the keyed pseudonym, ``workflows.domain.pseudonym``; never the email or the id,
which holds the name), with its source: the conversation and turn it was learnt in and the
user's verbatim words. One fact per kind per customer (``fact_id``): remembering a kind again
replaces the value, and the latest confirmation wins. Pure: imported inside the workflow sandbox.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from enum import Enum
from typing import Optional

from pydantic import BaseModel, Field


class FactKind(str, Enum):
    """The kinds of fact the policy allows (``docs/memory.md``)."""

    REFUND_METHOD = "refund_method"
    """The payment method id refunds go to (one of the customer's)."""
    DELIVERY_INSTRUCTIONS = "delivery_instructions"
    """How parcels are to be delivered ("do not leave at the door")."""
    PREFERRED_LANGUAGE = "preferred_language"
    """The language the customer prefers to be answered in."""
    OPEN_COMPLAINT = "open_complaint"
    """A complaint about one of the customer's orders that is not settled yet."""


MAX_VALUE_CHARS = 200
"""The longest value kept (visible characters); a longer one is refused, never cut."""
MAX_WORDS_CHARS = 500
"""The longest quotation of the user's words kept with a fact (cut at this length)."""

RETENTION_DAYS: dict[FactKind, int] = {
    FactKind.REFUND_METHOD: 365,
    FactKind.DELIVERY_INSTRUCTIONS: 365,
    FactKind.PREFERRED_LANGUAGE: 730,
    FactKind.OPEN_COMPLAINT: 90,
}
"""Default days a fact is kept after it was last confirmed (``Settings.memory_retention_days``
overrides per kind)."""


class FactSource(BaseModel):
    """Where a fact was learnt: the caller's conversation id, the user turn, and the user's
    words in that turn (verbatim, at most ``MAX_WORDS_CHARS``)."""

    conversation_id: str = Field(max_length=1000)
    turn: int = Field(ge=0)
    words: str = Field(max_length=MAX_WORDS_CHARS)


class MemoryFact(BaseModel):
    """A remembered fact as the store keeps it and callers read it (UTC times)."""

    fact_id: str = Field(max_length=40)
    kind: FactKind
    value: str = Field(max_length=MAX_VALUE_CHARS)
    order_id: Optional[str] = Field(default=None, max_length=100)
    """The order an open complaint is about (None for other kinds)."""
    source: FactSource
    learnt_at: datetime
    confirmed_at: datetime
    expires_at: datetime


def fact_id(tenant: str, store: str, customer: str, kind: FactKind) -> str:
    """``mem_`` + 24 hex digits of sha256(tenant, store, customer pseudonym, kind): the one fact
    of that kind for that customer, whichever conversation wrote it."""
    parts = "|".join(f"{len(p)}:{p}" for p in (tenant, store, customer, kind.value))
    return "mem_" + hashlib.sha256(parts.encode()).hexdigest()[:24]


def expiry(kind: FactKind, confirmed_at: datetime, retention_days: Optional[dict[str, int]] = None) -> datetime:
    """When a fact of ``kind`` confirmed at ``confirmed_at`` expires (``retention_days``: days per
    kind value, overriding ``RETENTION_DAYS``)."""
    days = (retention_days or {}).get(kind.value, RETENTION_DAYS[kind])
    return confirmed_at + timedelta(days=days)


