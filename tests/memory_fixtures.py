"""Remembered facts for tests that need some in the memory store before the conversation side
writes them (erasure, retention, the memory routes)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Optional

from activities.store.memory import MemoryStore
from workflows.domain.memory import FactKind, FactSource, MemoryFact, expiry, fact_id


def remember(store: MemoryStore, pseudonym: str, kind: FactKind, value: str, *, tenant: str = "default",
             at: Optional[datetime] = None, conversation_id: str = "c-1") -> MemoryFact:
    """Keep one fact of ``kind`` for ``pseudonym``, confirmed ``at`` (default now, UTC) in turn 2
    of ``conversation_id``; returns it as kept."""
    when = at or datetime.now(timezone.utc)
    return store.remember(tenant, "main", pseudonym, MemoryFact(
        fact_id=fact_id(tenant, "main", pseudonym, kind), kind=kind, value=value,
        source=FactSource(conversation_id=conversation_id, turn=2, words=f"please remember {value}"),
        learnt_at=when, confirmed_at=when, expires_at=expiry(kind, when)))
