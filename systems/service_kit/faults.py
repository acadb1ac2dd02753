"""Fault injection, controllable per call: the ``X-Fault`` header of one request, or faults
armed for the next N requests through the control endpoint ``POST /_faults``.

Kinds (``Fault``), as a caller sees them:

- ``http_5xx``: 503 at once; nothing was done.
- ``fail_before_commit``: the work runs, is rolled back, and the connection closes with no
  answer (ambiguous to the caller; a lookup proves it absent).
- ``commit_then_drop``: the work commits, then the connection closes with no answer
  (ambiguous; a lookup finds it).
- ``answer_after_timeout``: the work commits, the answer is held until after the caller's
  deadline (``X-Deadline``) plus one second (``X-Fault-Seconds`` overrides the delay).
- ``slow_lock``: the transaction holds its locks past the caller's deadline (or for
  ``X-Fault-Seconds``); the deadline then aborts it before commit: nothing commits late.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from enum import Enum
from typing import Optional

from pydantic import BaseModel, Field

FAULT_HEADER = "X-Fault"
FAULT_SECONDS_HEADER = "X-Fault-Seconds"
DEADLINE_HEADER = "X-Deadline"
"""Absolute deadline of the caller, Unix seconds (float): no work commits after it."""


class Fault(str, Enum):
    """The injectable faults (see the module docstring)."""

    HTTP_5XX = "http_5xx"
    FAIL_BEFORE_COMMIT = "fail_before_commit"
    COMMIT_THEN_DROP = "commit_then_drop"
    ANSWER_AFTER_TIMEOUT = "answer_after_timeout"
    SLOW_LOCK = "slow_lock"


class ArmFaults(BaseModel):
    """Body of ``POST /_faults``: inject ``kind`` into the next ``count`` effect requests
    (writes; lookups are never faulted by arming) whose path starts with ``path_prefix``."""

    kind: Fault
    count: int = Field(default=1, ge=1, le=1000)
    path_prefix: str = "/"
    seconds: Optional[float] = Field(default=None, ge=0, le=120)


class FaultBoard:
    """Armed faults and the count of faults injected, per process (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed: list[ArmFaults] = []
        self.injected: Counter[str] = Counter()

    def arm(self, faults: ArmFaults) -> None:
        with self._lock:
            self._armed.append(faults.model_copy())

    def clear(self) -> None:
        with self._lock:
            self._armed.clear()

    def take(self, path: str, header: Optional[str], seconds: Optional[str]) -> tuple[Optional[Fault], Optional[float]]:
        """The fault for one effect request at ``path``: the header's (ValueError for an
        unknown kind or seconds outside ``ArmFaults``' bounds), else the first armed one
        matching (consumed), else None."""
        with self._lock:
            if header:  # bounded as ``ArmFaults`` (ValueError): a negative, NaN or huge delay is refused
                asked = ArmFaults(kind=Fault(header), seconds=float(seconds) if seconds else None)
                fault, delay = asked.kind, asked.seconds
            else:
                armed = next((a for a in self._armed if path.startswith(a.path_prefix)), None)
                if armed is None:
                    return None, None
                armed.count -= 1
                if armed.count == 0:
                    self._armed.remove(armed)
                fault, delay = armed.kind, armed.seconds
            self.injected[fault.value] += 1
            return fault, delay


def deadline_of(header: Optional[str]) -> Optional[float]:
    """The caller's deadline (Unix seconds) from ``X-Deadline``; None when absent or not a number."""
    try:
        return float(header) if header else None
    except ValueError:
        return None


def remaining(deadline: Optional[float]) -> Optional[float]:
    """Seconds left before ``deadline`` (negative when past); None without one."""
    return None if deadline is None else deadline - time.time()
