"""Keyed pseudonyms for customer ids.

τ-bench customer ids contain people's names (``mia_garcia_4516``), so the ``CustomerId``
search attribute, shown in the Web UI's list, holds ``customer_pseudonym(id, key)``
instead. The key is a secret of the deployment (``Settings.pseudonym_secret``); the API's
``customer_id=`` filter and ``statekeeper link`` map a real id to its pseudonym with it.
Pure and deterministic (HMAC-SHA256), so it may run anywhere, workflows included.
"""

from __future__ import annotations

import hashlib
import hmac

PREFIX = "cust-"


def customer_pseudonym(customer_id: str, key: str) -> str:
    """``cust-`` + 20 hex characters of HMAC-SHA256(key, customer_id). Stable for a key;
    not reversible without it. Raises ``ValueError`` for an empty key."""
    if not key:
        raise ValueError("a pseudonym key is required")
    digest = hmac.new(key.encode("utf-8"), customer_id.encode("utf-8"), hashlib.sha256).hexdigest()
    return PREFIX + digest[:20]
