"""Retrying a client call through transient refusals, as a backend service should.

``unavailable``, ``timeout`` and ``outcome_unknown`` say the call may be sent again: a message
or a decision sent again with the same id is handled once and answers the first reply, and a
read changes nothing. Any other ``ConversationError`` is a definite answer and is raised at once.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, TypeVar

from starter.client.errors import ConversationError

T = TypeVar("T")

TRANSIENT_KINDS = frozenset({"unavailable", "timeout", "outcome_unknown"})
"""Refusals after which the same call, with the same ids, may simply be sent again."""


async def transient_retried(call: Callable[[], Awaitable[T]], attempts: int = 4, pause_seconds: float = 1.0) -> T:
    """``await call()``, called again up to ``attempts`` times in all, ``pause_seconds`` apart,
    while it raises a ``ConversationError`` of a ``TRANSIENT_KINDS`` kind (a loaded machine's
    deadline, a worker restarting). Raises the last such error, or any other at once."""
    for attempt in range(1, attempts + 1):
        try:
            return await call()
        except ConversationError as err:
            if err.kind not in TRANSIENT_KINDS or attempt == attempts:
                raise
        await asyncio.sleep(pause_seconds)
    raise AssertionError("unreachable")
