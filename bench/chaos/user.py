"""The user side of ``bench/chaos.py``: a front end that retries, and how a task ended.

``FrontEnd`` wraps ``StatekeeperClient`` the way a real front end uses it: every message
gets its own message id, and while the answer is unknown (Temporal restarting: the client
says ``outcome_unknown``, ``timeout``, ``unavailable``; all workers just killed:
``no_worker``) the same message is sent again with the same id, with backoff, until it is
answered or ``patience_seconds`` pass. Each message's seconds (first send to reply, retries
included) are kept for the p95. ``τ-bench``'s runner (``starter.ops.taubench``) drives it.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from typing import Any, Awaitable, Callable, Optional

from pydantic import BaseModel

from starter.client.conversations import ConversationError, StatekeeperClient

RETRYABLE = frozenset({"outcome_unknown", "timeout", "unavailable", "no_worker"})
"""Refusals after which a front end sends the same request again (same ids)."""


class FrontEnd:
    """``FrontEnd(client, patience_seconds)``: the retrying calls the τ-bench runner makes
    (``start_conversation``, ``send_message``, ``state``, ``decide_approval``); anything
    else is passed through. ``message_seconds`` holds one entry per answered message and
    ``retries`` counts resends."""

    def __init__(self, client: StatekeeperClient, patience_seconds: float = 900.0) -> None:
        self._client = client
        self._patience = patience_seconds
        self.message_seconds: list[float] = []
        self.retries = 0

    async def _again(self, call: Callable[[], Awaitable[Any]], first_refusal_ok: Optional[str] = None) -> Any:
        """``call()`` until it answers or refuses for good; ``first_refusal_ok``: a refusal
        kind that, on a resend, means the first send landed (returns None)."""
        deadline = time.monotonic() + self._patience
        pause, sent = 0.5, 0
        while True:
            try:
                return await call()
            except ConversationError as err:
                if sent and first_refusal_ok is not None and err.kind == first_refusal_ok:
                    return None
                if err.kind not in RETRYABLE or time.monotonic() > deadline:
                    raise
            sent += 1
            self.retries += 1
            await asyncio.sleep(pause)
            pause = min(5.0, pause * 1.6)

    async def start_conversation(self, conversation_id: str, **kwargs: Any) -> str:
        return await self._again(lambda: self._client.start_conversation(conversation_id, **kwargs))

    async def send_message(self, conversation_id: str, text: str, message_id: Optional[str] = None) -> Any:
        message_id = message_id or uuid.uuid4().hex
        started = time.monotonic()
        reply = await self._again(lambda: self._client.send_message(conversation_id, text, message_id))
        self.message_seconds.append(time.monotonic() - started)
        return reply

    async def state(self, conversation_id: str) -> Any:
        return await self._again(lambda: self._client.state(conversation_id))

    async def decide_approval(self, approval_id: str, decision: str, approver: str, **kwargs: Any) -> Any:
        return await self._again(lambda: self._client.decide_approval(approval_id, decision, approver, **kwargs),
                                 first_refusal_ok="approval_refused")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class Ending(BaseModel):
    """How one task ended: ``matched`` (the data hash is τ-bench's), ``escalated`` (to a
    human, with ``reason``), ``unmatched`` (finished otherwise: a failure of the suite), or
    ``lost`` (started, neither finished nor escalated)."""

    task_index: int
    kind: str
    status: str
    reason: str
    runner_reason: str
    seconds: float


_IDS = re.compile(r"#W\d+|\b[a-z]+_[a-z]+_\d{3,5}\b|\b\d{5,}\b")


def reason_group(reason: str) -> str:
    """``reason`` with order, user and other ids blanked, to group equal reasons."""
    return _IDS.sub("…", reason)[:240]


def ending(task_index: int, result: Any, state: Optional[Any]) -> Ending:
    """The ``Ending`` of a task from the runner's ``TaskResult`` and the conversation's final
    ``ConversationState`` (None when it could not be read)."""
    status = str(getattr(state.status, "value", state.status)) if state is not None else "unreadable"
    reason = (state.ended_reason or "") if state is not None else ""
    if result.hash_match:
        kind = "matched"
    elif status == "escalated":
        kind = "escalated" if reason else "unmatched"
    elif status in ("active", "unreadable"):
        kind = "lost"
    else:
        kind = "unmatched"
    return Ending(task_index=task_index, kind=kind, status=status, reason=reason or result.reason,
                  runner_reason=result.reason, seconds=result.seconds)


def p95(values: list[float]) -> float:
    """The 95th percentile (nearest rank) of ``values``; 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, -(-95 * len(ordered) // 100) - 1))]
