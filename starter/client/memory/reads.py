"""What statekeeper remembers about a customer, read and corrected by a backend or an operator
(``workflows.domain.memory``; the store is ``activities.store.memory``).

``CustomerMemory`` takes the customer id as the lists take it (the real id, mapped here to its
keyed pseudonym, the only form the store holds) and a tenant: another tenant's facts are never
seen. Expired facts are never returned.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Optional

from pydantic import BaseModel

from activities.store.memory import MemoryStore
from starter.client.errors import ConversationError
from starter.client.listing import FILTER_PATTERN
from workflows.domain.memory import MemoryFact
from workflows.domain.pseudonym import customer_pseudonym


class MemoryPage(BaseModel):
    """``GET /customers/{customer_id}/memory``: every fact kept about the customer."""

    items: list[MemoryFact]


class CustomerMemory:
    """The memory store at ``url`` as one tenant's callers see it. ``pseudonym_key``: the
    workers' key (``Settings.pseudonym_secret``); without it no customer can be named."""

    def __init__(self, url: str, pseudonym_key: Optional[str]) -> None:
        self._store = MemoryStore(url)
        self._key = pseudonym_key

    def pseudonym(self, customer_id: str) -> str:
        """The customer's pseudonym. Raises ``ConversationError`` ``invalid`` for an id that is
        not id-shaped, ``unavailable`` without the workers' pseudonym key."""
        if not FILTER_PATTERN.fullmatch(customer_id):  # the lists' rule for a customer id
            raise ConversationError("a customer id is 1-128 characters of letters, digits and #._:@-", "invalid")
        if not self._key:
            raise ConversationError("reading a customer's memory needs the workers' pseudonym key: set "
                                    "STATEKEEPER_DATA_DIR to their data directory or STATEKEEPER_PSEUDONYM_KEY",
                                    "unavailable")
        return customer_pseudonym(customer_id, self._key)

    def facts(self, tenant: str, customer_id: str, now: Optional[datetime] = None) -> MemoryPage:
        """The customer's facts in ``tenant`` not expired ``now`` (default: the current time)."""
        at = now or datetime.now(timezone.utc)
        return MemoryPage(items=self._store.facts(tenant, self.pseudonym(customer_id), at))

    def forget(self, tenant: str, customer_id: str, fact_id: str) -> None:
        """Remove one fact. Raises ``ConversationError`` ``not_found`` when the customer has no
        fact with that id in ``tenant`` (also when it was forgotten already)."""
        if not self._store.forget(tenant, self.pseudonym(customer_id), fact_id):
            raise ConversationError(f"no remembered fact {fact_id[:80]} for this customer", "not_found")

    def close(self) -> None:
        """Close the store's connections."""
        self._store.dispose()
