"""The unknown-outcome protocol for effects on external systems.

Before a request is sent, its effect key is recorded as ``dispatched`` in the dispatch log
(our own database). After an ambiguous failure (timeout, dropped connection, a 5xx that may
follow a commit) the next attempt first asks the system, by key or business reference:

- found (committed) → recorded as ``committed`` and the original result returned, nothing sent;
- proven absent → sent again;
- the system cannot say (the lookup fails) → ``OutcomeUnknown`` (non-retryable): the step is
  escalated to a human, nothing is replayed automatically.

Without a dispatch log (tests), or while our database cannot be reached, any attempt after
the first asks first.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from typing import Any, Callable, Optional, TypeVar

import sqlalchemy as sa

from activities.store.dispatch import dispatches as _dispatches
from activities import deadline
from activities.ports import PortError
from workflows.domain.errors import ErrorType

T = TypeVar("T")

class Ambiguous(Exception):
    """The request may or may not have taken effect (retryable: the next attempt reconciles)."""


class NotDone(Exception):
    """The request certainly took no effect (not sent, or the system said so); retryable."""


class OutcomeUnknown(PortError):
    """After an ambiguous failure the system could not say whether the effect happened."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorType.OUTCOME_UNKNOWN, message)


def _hashed(key: str) -> str:
    # keys name orders, conversations and (for a user's address change) a user id, which
    # erasure would have to find here too: the log keeps only the key's digest
    return hashlib.sha256(key.encode()).hexdigest()


class DispatchLog:
    """``DispatchLog(engine)``: the status of each effect key sent to an external system
    (``dispatched``, ``committed``, ``absent``) in table ``effect_dispatches``, under the
    key's SHA-256 (no personal data: results are the adapters' brief summaries)."""

    def __init__(self, engine: sa.engine.Engine) -> None:
        self.engine = engine
        self._ready = False  # migrated on first use: a worker starts while the database is down

    def _schema(self) -> None:
        if not self._ready:
            from activities.store.migrate import upgrade  # noqa: PLC0415  (Alembic only when used)

            upgrade(self.engine)
            self._ready = True

    def status(self, key: str) -> tuple[Optional[str], Any]:
        """(status, result) recorded for ``key``; (None, None) when never dispatched."""
        self._schema()
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(_dispatches.c.status, _dispatches.c.result)
                               .where(_dispatches.c.effect_key == _hashed(key))).first()
        if row is None:
            return None, None
        return row.status, None if row.result is None else json.loads(row.result)

    def mark(self, key: str, system: str, status: str, result: Any = None) -> None:
        """Record ``status`` (and ``result``, JSON-able) for ``key``."""
        self._schema()
        values = {"system": system, "status": status, "updated_at": datetime.now(timezone.utc),
                  "result": None if result is None else json.dumps(result)}
        with self.engine.begin() as conn:
            updated = conn.execute(_dispatches.update().where(_dispatches.c.effect_key == _hashed(key))
                                   .values(**values))
            if updated.rowcount == 0:
                conn.execute(_dispatches.insert().values(effect_key=_hashed(key), **values))


def reconciled(system: str, key: str, lookup: Callable[[], Optional[T]], dispatch: Callable[[], T],
               log: Optional[DispatchLog], always_ask: bool = False) -> tuple[T, bool]:
    """Run ``dispatch`` for effect ``key`` on ``system`` under the protocol (module docstring).
    Returns (result, replayed): replayed is True when the effect was found already done.
    Results are JSON values (the log stores them).
    ``lookup`` returns the recorded result or None (proven absent) and raises when the system
    cannot answer. Raises ``OutcomeUnknown``, ``Ambiguous``/``NotDone`` (retryable) or
    ``PortError`` from ``dispatch``. ``always_ask``: look up before every first send too (for
    systems without idempotency keys); a failed lookup then is retryable, not unknown."""
    status, recorded, usable = None, None, log is not None
    if log is not None:
        try:
            status, recorded = log.status(key)
        except Exception:  # noqa: BLE001 - our own log is down: fall back to the attempt number
            usable = False
    if status == "committed" and recorded is not None:
        return recorded, True  # the system answered an earlier attempt
    must_know = status == "dispatched" or (not usable and deadline.attempt() > 1)
    if must_know or always_ask:
        # an earlier attempt may have sent it: only the system can say (must_know), or a system
        # without idempotency keys is asked first anyway (a reset re-runs a send as attempt 1)
        found = lookup_or_unknown(system, key, lookup) if must_know else lookup()
        if found is not None:
            _mark(log if usable else None, key, system, "committed", found)
            return found, True
    _mark(log if usable else None, key, system, "dispatched")
    try:
        result = dispatch()
    except (NotDone, PortError):
        _mark(log if usable else None, key, system, "absent")  # nothing was done
        raise
    _mark(log if usable else None, key, system, "committed", result)
    return result, False


def _mark(log: Optional[DispatchLog], key: str, system: str, status: str, result: Any = None) -> None:
    # the log serves the next attempt; when it cannot be written, the attempt number does
    if log is None:
        return
    try:
        log.mark(key, system, status, result)
    except Exception:  # noqa: BLE001
        pass


def lookup_or_unknown(system: str, key: str, lookup: Callable[[], Optional[T]]) -> Optional[T]:
    """``lookup()``, or ``OutcomeUnknown`` when the system cannot answer it."""
    try:
        return lookup()
    except PortError:
        raise
    except Exception as err:  # noqa: BLE001 - any failure to answer means: cannot tell
        raise OutcomeUnknown(f"the {system} system could not say whether an earlier attempt took effect") from err
