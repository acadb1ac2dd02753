"""The payments port and its HTTP adapter (``systems.payments`` over ``httpx``).

Money moves in two systems: the retail store (the system of record for orders) appends the
movements to the order's ``payment_history`` exactly as τ-bench does (so its hashes match),
and the payments service moves the money, once per idempotency key. The movements a write
made are read back from the order it returned (``money_movements``, by the tool spec's
``payment_movements``), so a retried write, which gets the recorded order, asks for the same
movements under the same key.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Optional, Protocol
from urllib.parse import quote

from activities.http_service import ServiceClient
from activities.reconcile import DispatchLog, reconciled
from workflows.domain.catalogue import spec_of


MAX_KEY_CHARS = 300
"""The payments service's bound on ``Idempotency-Key`` (as sent: ``wire_key``)."""


def payments_key(write_key: str) -> str:
    """The payments service's ``Idempotency-Key`` for the money of write ``write_key``:
    ``pay:{write_key}``, or ``pay:sha256:<hex of write_key>`` when that, as sent, is over the
    service's bound. A write key holds the conversation id (up to 256 characters over HTTP,
    992 bytes from the Python client, percent-encoded when not ASCII): sent whole, a long one
    would be refused (422) after the order's write had committed: the order cancelled and
    its money never moved. The same write key always gives the same payments key."""
    key = f"pay:{write_key}"
    if len(wire_key(key)) <= MAX_KEY_CHARS:
        return key
    return "pay:sha256:" + hashlib.sha256(write_key.encode("utf-8", "surrogatepass")).hexdigest()


def wire_key(key: str) -> str:
    """``key`` as the payments service stores it: as is when ASCII without ``%`` (every key
    of an API conversation); otherwise percent-encoded (UTF-8, ``%`` included: every encoded
    key holds a ``%`` and no unencoded one does, so distinct keys stay distinct). An HTTP
    header carries ASCII only: a key naming a conversation id such as ``café`` (the Python
    client takes one) could never be sent (``UnicodeEncodeError`` on every attempt, after the
    order's write had committed: escalated as "could not be reached")."""
    if key.isascii() and "%" not in key:
        return key
    return quote(key, safe="".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%"))


def money_movements(tool: str, result: str) -> Optional[list[dict[str, Any]]]:
    """The movements (``{transaction_type, amount, payment_method_id}``, amounts as decimal
    text) that write ``tool`` made, from the order it returned as ``result`` (JSON): its
    spec's ``payment_movements``. None for a tool that moves no money now (returns and
    exchanges only request it: τ-bench moves nothing for them) or a result that is not an
    order. Raises ``KeyError`` for a tool not in the catalogue."""
    movements = spec_of(tool).payment_movements
    if movements is None:
        return None
    try:
        moved = movements(json.loads(result)["payment_history"])
    except (ValueError, KeyError, TypeError):
        return None
    return [{"transaction_type": m["transaction_type"], "amount": f"{float(m['amount']):.2f}",
             "payment_method_id": m["payment_method_id"]} for m in moved]


class PaymentsPort(Protocol):
    """Moves money exactly once per key."""

    def move(self, key: str, reference: str, kind: str, movements: list[dict[str, Any]]) -> dict[str, Any]:
        """Move ``movements`` for ``reference`` (an order id) once per ``key``; returns the
        recorded operation (``replayed`` True when it was already done). Raises ``PortError``
        (invalid data, key conflict), ``OutcomeUnknown``, or a retryable failure."""
        ...


def _brief(operation: dict[str, Any]) -> dict[str, Any]:
    # what the dispatch log keeps of an operation: no payment method ids
    return {"movements": len(operation["movements"]), "replayed": bool(operation.get("replayed"))}


class HttpPayments:
    """``HttpPayments(base_url, timeout_seconds, log)``: ``PaymentsPort`` over the payments
    service; ``log`` is the dispatch log of the unknown-outcome protocol (optional)."""

    def __init__(self, base_url: str, timeout_seconds: float = 10.0, log: Optional[DispatchLog] = None) -> None:
        self.client = ServiceClient(base_url, "payments", timeout_seconds)
        self.log = log

    def move(self, key: str, reference: str, kind: str, movements: list[dict[str, Any]]) -> dict[str, Any]:
        """See ``PaymentsPort.move``."""
        body = {"reference": reference, "kind": kind, "movements": movements}

        def lookup() -> Optional[dict[str, Any]]:
            return self.find(key)

        def dispatch() -> dict[str, Any]:
            return _brief(self.client.send("POST", "/operations", json=body, headers={"Idempotency-Key": wire_key(key)}).json())

        result, replayed = reconciled("payments", key, lookup, dispatch, self.log)
        return {**result, "replayed": replayed or bool(result.get("replayed"))}

    def find(self, key: str) -> Optional[dict[str, Any]]:
        """The operation recorded under ``key`` (brief), or None when the service has none."""
        # keys hold '#' (order ids): unquoted, httpx would send the rest as a URL fragment
        found = self.client.get(f"/operations/{quote(wire_key(key), safe='')}")
        return None if found is None else _brief(found.json())

    def operations(self, reference: str) -> list[dict[str, Any]]:
        """Every operation recorded for ``reference`` (tests, duplicate counts)."""
        found = self.client.get("/operations", params={"reference": reference})
        return [] if found is None else found.json()
