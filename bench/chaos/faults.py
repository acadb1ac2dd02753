"""Faults and duplicate counts for ``bench/chaos.py``.

``ChaosBoard`` replaces a service's ``FaultBoard`` (``systems.service_kit.faults``): each
effect request (a payment, an email, a ticket; lookups never) gets a fault with probability
``rate``, its kind dealt from a shuffled deck of every ``Fault`` so that any five faults
cover all five kinds. ``duplicates`` counts applied effects per business key directly in
the four databases.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from typing import Any, Optional

import sqlalchemy as sa

from systems.service_kit.faults import Fault, FaultBoard


class ChaosBoard(FaultBoard):
    """``ChaosBoard(rate, seed, counts, lock)``: a ``FaultBoard`` that also faults effect
    requests at random (``rate`` in [0, 1]); ``counts`` (shared by the services of a run)
    counts every fault injected by kind. The ``X-Fault`` header and armed faults still win."""

    def __init__(self, rate: float, seed: int, counts: Counter, lock: threading.Lock) -> None:
        super().__init__()
        self.rate = rate
        self._rng = random.Random(seed)
        self._deck: list[Fault] = []
        self.counts = counts
        self._shared = lock

    def take(self, path: str, header: Optional[str], seconds: Optional[str]) -> tuple[Optional[Fault], Optional[float]]:
        fault, delay = super().take(path, header, seconds)
        if fault is None and self._rng.random() < self.rate:
            with self._shared:
                if not self._deck:
                    self._deck = list(Fault)
                    self._rng.shuffle(self._deck)
                fault = self._deck.pop()
        if fault is not None:
            with self._shared:
                self.counts[fault.value] += 1
        return fault, delay


def install(apps: dict[str, Any], rate: float, seed: int) -> Counter:
    """Give each service app of ``apps`` ({name: FastAPI app of ``Fleet``}) a ``ChaosBoard``
    sharing one deck lock and one counter; returns the counter ({fault kind: injected})."""
    counts: Counter = Counter()
    lock = threading.Lock()
    for i, name in enumerate(sorted(apps)):
        apps[name].state.effects.board = ChaosBoard(rate, seed * 31 + i, counts, lock)
    return counts


def _conversation(key: str) -> str:
    """The conversation of an effect key: its last ``:`` part without the turn
    (``pay:cancel_pending_order:#W1:tb-x-3.t4`` → ``tb-x-3``)."""
    return key.rsplit(":", 1)[-1].rsplit(".t", 1)[0]


def duplicates(urls: dict[str, str]) -> dict[str, int]:
    """Applied effects beyond the first per business key, counted in each database of
    ``urls`` (``chaos_stack.DATABASES``): retail, one per (store, tool, arguments) among
    applied ledger rows; payments, one per (conversation, operation body digest); email and
    ticketing, one per business reference (neither has idempotency keys, so a second row is
    a second email or ticket)."""
    queries = {
        "sor": "SELECT COALESCE(SUM(n - 1), 0) FROM (SELECT COUNT(*) AS n FROM ledger WHERE ok "
               "GROUP BY store, tool, args_digest) AS t",
        "email": "SELECT COALESCE(SUM(n - 1), 0) FROM (SELECT COUNT(*) AS n FROM email_messages "
                 "GROUP BY reference) AS t",
        "ticketing": "SELECT COALESCE(SUM(n - 1), 0) FROM (SELECT COUNT(*) AS n FROM tickets GROUP BY reference) AS t",
    }
    out: dict[str, int] = {}
    for name, query in queries.items():
        engine = sa.create_engine(urls[name])
        try:
            with engine.connect() as conn:
                out[name] = int(conn.execute(sa.text(query)).scalar_one())
        finally:
            engine.dispose()
    engine = sa.create_engine(urls["payments"])
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT idempotency_key, digest FROM payment_operations")).all()
    finally:
        engine.dispose()
    per_key = Counter((_conversation(key), digest) for key, digest in rows)
    out["payments"] = sum(n - 1 for n in per_key.values())
    return {"retail" if k == "sor" else k: v for k, v in out.items()}
