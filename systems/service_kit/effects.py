"""Running one effect request of a service: its transaction under the caller's deadline,
with the fault the request carries (``systems.service_kit.faults``).

Every transaction on PostgreSQL gets ``statement_timeout`` and ``lock_timeout`` from the
time left before the caller's deadline, and the deadline is checked again right before
commit: work the caller has given up on is rolled back, never committed late.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

import sqlalchemy as sa
from fastapi import HTTPException, Request
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DataError, IntegrityError, OperationalError

from systems.retail.engine import for_writing
from systems.service_kit.faults import (
    DEADLINE_HEADER,
    FAULT_HEADER,
    FAULT_SECONDS_HEADER,
    Fault,
    FaultBoard,
    deadline_of,
    remaining,
)


class DropConnection(Exception):
    """Raised by an effect to close the connection with no answer (``service_kit.app``)."""


class Effects:
    """``Effects(engine, board)``: runs effect requests on ``engine`` with the faults of ``board``."""

    def __init__(self, engine: Engine, board: FaultBoard) -> None:
        self.engine = engine
        self.board = board
        self._pg = engine.dialect.name == "postgresql"

    def run(self, request: Request, work: Callable[[Connection], Any]) -> Any:
        """Run ``work(conn)`` in one transaction and return its value, honouring the request's
        deadline and fault. Raises ``HTTPException`` 503 (``http_5xx``), 504 (the deadline
        passed before commit: nothing committed), 422 (the database refused the data, e.g. a
        NUL character on PostgreSQL: deterministic), 409 (a constraint), 400 (an unknown
        fault kind), or ``DropConnection``."""
        try:
            fault, delay = self.board.take(request.url.path, request.headers.get(FAULT_HEADER),
                                           request.headers.get(FAULT_SECONDS_HEADER))
        except ValueError:
            raise HTTPException(400, "unknown fault kind, or fault seconds outside 0 to 120; nothing was done"
                                ) from None
        deadline = deadline_of(request.headers.get(DEADLINE_HEADER))
        if fault is Fault.HTTP_5XX:
            raise HTTPException(503, "injected fault: service unavailable; nothing was done")
        self._check(deadline)
        try:
            with self.engine.connect() as raw:
                conn = for_writing(raw)  # read-then-insert: SQLite's lock taken up front, not upgraded
                tx = conn.begin()
                try:
                    self._timeouts(conn, deadline)
                    value = work(conn)
                    if fault is Fault.SLOW_LOCK:
                        self._hold(conn, deadline, delay)
                    if fault is Fault.FAIL_BEFORE_COMMIT:
                        tx.rollback()
                        raise DropConnection()
                    self._check(deadline)
                    tx.commit()
                except BaseException:
                    if tx.is_active:
                        tx.rollback()
                    raise
        except DataError as err:
            raise HTTPException(422, "the data was refused as invalid; nothing was done") from err
        except IntegrityError as err:
            raise HTTPException(409, "the request conflicts with a recorded one; nothing was done") from err
        except OperationalError as err:
            if deadline is not None and (remaining(deadline) or 0) <= 0.5:
                raise HTTPException(504, "the caller's deadline passed; nothing was committed") from err
            raise
        if fault is Fault.COMMIT_THEN_DROP:
            raise DropConnection()
        if fault is Fault.ANSWER_AFTER_TIMEOUT:
            time.sleep(delay if delay is not None else max(0.0, (remaining(deadline) or 0.0) + 1.0))
        return value

    @staticmethod
    def _check(deadline: Optional[float]) -> None:
        left = remaining(deadline)
        if left is not None and left <= 0:
            raise HTTPException(504, "the caller's deadline passed; nothing was committed")

    def _timeouts(self, conn: Connection, deadline: Optional[float]) -> None:
        left = remaining(deadline)
        if self._pg and left is not None:
            ms = max(1, int(left * 1000))
            conn.execute(sa.text(f"SET LOCAL statement_timeout = {ms}"))
            conn.execute(sa.text(f"SET LOCAL lock_timeout = {ms}"))

    def _hold(self, conn: Connection, deadline: Optional[float], delay: Optional[float]) -> None:
        # hold the transaction's locks: past the deadline unless told how long
        left = remaining(deadline)
        seconds = delay if delay is not None else (left + 1.0 if left is not None else 2.0)
        if self._pg:
            conn.execute(sa.text("SELECT pg_sleep(:s)"), {"s": seconds})  # statement_timeout cuts it
        else:
            time.sleep(seconds if left is None else min(seconds, max(0.0, left) + 0.05))
