"""The deadline of the current activity attempt: the work of an attempt must end before
Temporal gives up on it, so that no abandoned attempt commits later.

``ToolActivities`` sets it (``attempt_deadline``) from the attempt's start-to-close timeout;
adapters read it (``current``): the HTTP adapters send it to the services (``X-Deadline``) and
bound their own timeout by it; the retail adapter passes it to the system's transactions
(``statement_timeout``/``lock_timeout`` on PostgreSQL, a check before commit)."""

from __future__ import annotations

import contextlib
import time
from contextvars import ContextVar
from typing import Iterator, Optional

from temporalio import activity

_DEADLINE: ContextVar[Optional[float]] = ContextVar("statekeeper_attempt_deadline", default=None)

MARGIN_SECONDS = 1.0
"""Kept free before the attempt's timeout: time for the answer to travel back and be recorded."""


def current() -> Optional[float]:
    """The deadline (Unix seconds) of the work in progress, or None (no activity: tests)."""
    return _DEADLINE.get()


def attempt() -> int:
    """The current activity attempt (1 outside an activity)."""
    return activity.info().attempt if activity.in_activity() else 1


@contextlib.contextmanager
def attempt_deadline() -> Iterator[Optional[float]]:
    """Set the deadline of this activity attempt for the block: now + its start-to-close
    timeout - a margin (at most a tenth of it). Outside an activity, or without that timeout,
    nothing is set. Yields the deadline."""
    timeout = activity.info().start_to_close_timeout if activity.in_activity() else None
    if not timeout:
        yield current()
        return
    seconds = timeout.total_seconds()
    token = _DEADLINE.set(time.time() + seconds - min(MARGIN_SECONDS, seconds / 10))
    try:
        yield _DEADLINE.get()
    finally:
        _DEADLINE.reset(token)


@contextlib.contextmanager
def deadline_in(seconds: float) -> Iterator[float]:
    """Set a deadline ``seconds`` from now for the block (tests, callers outside activities)."""
    token = _DEADLINE.set(time.time() + seconds)
    try:
        yield _DEADLINE.get()
    finally:
        _DEADLINE.reset(token)
