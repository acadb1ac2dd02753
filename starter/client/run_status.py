"""A process's status when its run closed without the workflow's own last word.

A workflow publishes its status (the ``Status`` search attribute, ``ConversationState.status``)
itself, so a run that Temporal terminated, timed out or failed still says what it said while
it ran ("active", "running"). Temporal's execution status is the truth then: the state,
the lists and their ``?status=`` filter all use its word (``terminated``, ``timed_out``,
``failed``), so an item shown as terminated is found by ``status=terminated``; the state's
phase is then ``closed``.
A run cancelled through Temporal ran its own cancel path and published "cancelled": that word stands.
"""

from __future__ import annotations

from typing import Any, Optional

from temporalio.client import WorkflowExecutionStatus

from starter.client.core import ClientCore
from workflows.domain.records import ConversationStatus, Phase
from workflows.domain.state import ConversationState

ABNORMAL = {
    WorkflowExecutionStatus.TERMINATED: "Terminated",
    WorkflowExecutionStatus.TIMED_OUT: "TimedOut",
    WorkflowExecutionStatus.FAILED: "Failed",
}
"""Execution statuses of a run that ended without the workflow's say, with their names in a
visibility query."""
ABNORMAL_WORDS = {status.name.lower(): name for status, name in ABNORMAL.items()}
"""``terminated`` / ``timed_out`` / ``failed`` → ``ExecutionStatus`` value in a visibility query."""
RUNNING_WORDS = frozenset({ConversationStatus.ACTIVE, ConversationStatus.ESCALATED})
"""Conversation statuses of a run still going on (an escalation waits for an operator's resolution)."""


def abnormal_word(status: Optional[WorkflowExecutionStatus]) -> Optional[str]:
    """``terminated``, ``timed_out`` or ``failed`` for a run that ended so; None otherwise."""
    return status.name.lower() if status in ABNORMAL else None


def status_clause(word: str) -> Optional[str]:
    """The visibility clause for a ``?status=`` filter on ``word`` when it is an abnormal end
    (``ExecutionStatus = "Terminated"``); None when the ``Status`` search attribute answers it."""
    name = ABNORMAL_WORDS.get(word)
    return f'ExecutionStatus = "{name}"' if name else None


async def with_run_status(core: ClientCore, handle: Any, state: ConversationState) -> ConversationState:
    """``state`` with its status replaced by the run's abnormal end (and its phase closed), when
    the state still says the run is going on (one describe RPC then). Unreadable: ``state`` as it is (the query
    answered, so the state itself is right)."""
    if state.status not in RUNNING_WORDS:
        return state
    try:
        described = await core.read(lambda: handle.describe(rpc_timeout=core.rpc_timeout))
    except Exception:  # noqa: BLE001 - the query's answer stands without it
        return state
    word = abnormal_word(described.status)
    return state.model_copy(update={"status": ConversationStatus(word), "phase": Phase.CLOSED}) if word else state
