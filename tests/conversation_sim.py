"""A simulated system of record for the conversation property test
(tests/core/conversation_invariants_machine.py): the τ-bench retail tools as pure functions
over an in-memory copy of the benchmark's data, behind a ledger keyed by the idempotency
key the workflow computes (``workflows.domain.keys``), with the write faults of ``Fate``.

It records every call it receives (reads, writes, tickets), the number of times each
key's effect was applied, and the before-image of every reversible write's subject at the
moment the effect first applied, so the test can check what the user is told against what
really happened.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache
from typing import Any, Optional

from systems.retail import load_data
from systems.retail.ledger import args_digest
from systems.retail.tools import run_tool
from workflows.domain.actions import call_arguments
from workflows.domain.catalogue import ToolClass, spec_of
from workflows.domain.contracts import Outcome, ToolResult

CUSTOMER = "raj_sanchez_2970"
EMAIL = "raj.sanchez2046@example.com"
PENDING = "#W4566809"
DELIVERED = "#W7736708"
CARD = "credit_card_3362387"
GIFT = "gift_card_2259499"


class Fate(str, Enum):
    """What happens to one write request on its way to the system of record."""

    OK = "ok"
    """Delivered; the answer comes back."""
    LOST_THEN_RETRIED = "lost_then_retried"
    """Committed, the answer lost; Temporal's retry finds the ledger row (replayed)."""
    UNKNOWN_COMMITTED = "unknown_committed"
    """Committed, and every attempt's answer lost: the retries run out (outcome unknown)."""
    UNKNOWN_ABSENT = "unknown_absent"
    """Never reached the system; the retries run out (outcome unknown)."""


@dataclass
class Call:
    """One request the system received: ``kind`` read, write or ticket; ``key`` for writes and tickets."""

    kind: str
    name: str
    key: Optional[str] = None
    index: int = 0
    tag: str = ""
    """What the caller was doing (``flight:<key>``, ``compensation``), set by the driver."""


def identity(key: str, arguments: dict[str, Any]) -> str:
    """One write effect: its idempotency key and the digest of its arguments."""
    return f"{key}|{args_digest(arguments)}"


@lru_cache
def _customer_data() -> str:
    """The customer's slice of the benchmark data (their user, orders and products), as JSON."""
    data = load_data()
    user = data["users"][CUSTOMER]
    orders = {o: data["orders"][o] for o in user["orders"]}
    products = {i["product_id"]: data["products"][i["product_id"]] for o in orders.values() for i in o["items"]}
    return json.dumps({"users": {CUSTOMER: user}, "orders": orders, "products": products})


@dataclass
class SimSystem:
    """The system of record: data, ledger (key → (digest, result, ok)), applied counts, tickets."""

    data: dict[str, Any] = field(default_factory=lambda: json.loads(_customer_data()))
    ledger: dict[str, tuple[str, str, bool]] = field(default_factory=dict)
    applied: Counter = field(default_factory=Counter)
    effects: Counter = field(default_factory=Counter)
    """Applied effects by ``identity(key, arguments)``: a key holds one call, so a reset that
    re-proposes another call at the same turn is refused as a conflict, not confused with it."""
    tickets: dict[str, str] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    before: dict[str, Any] = field(default_factory=dict)
    """Write key → the subject's address right before the key's effect applied (reversible writes)."""
    tag: str = ""

    def _log(self, kind: str, name: str, key: Optional[str] = None) -> None:
        self.calls.append(Call(kind, name, key, len(self.calls), self.tag))

    def read(self, call: Any) -> ToolResult:
        """A read tool, answered from the current data."""
        self._log("read", call.name)
        result = run_tool(self.data, call.name, call_arguments(call))
        return ToolResult(result=result, outcome=Outcome.REFUSED if result.startswith("Error") else Outcome.APPLIED)

    def document(self, subject: str, subject_id: str) -> Optional[dict[str, Any]]:
        """The user or order document as stored now (a read the workflow makes for before-images)."""
        self._log("read", f"document:{subject}")
        table = "users" if subject == "user_id" else "orders"
        doc = self.data[table].get(subject_id)
        return copy.deepcopy(doc) if doc is not None else None

    def recorded(self, call: Any, key: str) -> Optional[ToolResult]:
        """The ledger's answer for ``key`` (``find_recorded_write``), None when absent."""
        self._log("lookup", call.name, key)
        entry = self.ledger.get(key)
        if entry is None or entry[0] != args_digest(call_arguments(call)):
            return None
        return ToolResult(result=entry[1], outcome=Outcome.APPLIED if entry[2] else Outcome.REFUSED, replayed=True)

    def write(self, call: Any, key: str, fate: Fate = Fate.OK) -> ToolResult:
        """One write request with idempotency key ``key`` meeting ``fate``."""
        self._log("write", call.name, key)
        if fate is Fate.UNKNOWN_ABSENT:
            return ToolResult(result="the order system could not be reached", outcome=Outcome.UNKNOWN)
        args = call_arguments(call)
        digest = args_digest(args)
        entry = self.ledger.get(key)
        if entry is not None:
            if entry[0] != digest:  # the real ledger raises IdempotencyKeyConflict: known not applied
                return ToolResult(result="Error: this step already holds a different change", outcome=Outcome.REFUSED)
            replayed = ToolResult(result=entry[1], outcome=Outcome.APPLIED if entry[2] else Outcome.REFUSED,
                                  replayed=True)
            return replayed if fate is not Fate.UNKNOWN_COMMITTED else self._unknown()
        spec = spec_of(call.name)
        before = None
        if spec.tool_class is ToolClass.REVERSIBLE_WRITE and spec.subject:
            doc = self.document(spec.subject, args[spec.subject])
            before = copy.deepcopy(doc.get("address")) if doc else None
        result = run_tool(self.data, call.name, args)
        ok = not result.startswith("Error")
        self.ledger[key] = (digest, result, ok)
        if ok:
            self.applied[key] += 1
            self.effects[identity(key, args)] += 1
            if before is not None:
                self.before[key] = before
        if fate is Fate.UNKNOWN_COMMITTED:
            return self._unknown()
        return ToolResult(result=result, outcome=Outcome.APPLIED if ok else Outcome.REFUSED,
                          replayed=fate is Fate.LOST_THEN_RETRIED)

    @staticmethod
    def _unknown() -> ToolResult:
        return ToolResult(result="the order system did not answer in time", outcome=Outcome.UNKNOWN)

    def ticket(self, key: str, summary: str) -> bool:
        """Open a hand-off ticket once per key."""
        self._log("ticket", "open_ticket", key)
        self.tickets.setdefault(key, summary)
        return True

    def has_ticket(self, key: str) -> bool:
        """``find_ticket``: whether a ticket is open under ``key`` (a read)."""
        self._log("lookup", "find_ticket", key)
        return key in self.tickets

    def cancel_out_of_band(self, order_id: str) -> None:
        """Another agent cancels a pending order directly in the system (the conversation does not know)."""
        order = self.data["orders"][order_id]
        if order["status"] == "pending":
            order["status"] = "cancelled"
