"""A process's status when Temporal knows better than the workflow's own last word: its run
closed without it, or it runs but is stuck.

**Closed.** A workflow publishes its status (the ``ProcessStatus`` search attribute, ``ConversationState.status``)
itself, so a run that Temporal terminated, timed out or failed still says what it said while
it ran ("active", "running"). Temporal's execution status is the truth then: the state,
the lists and their ``?status=`` filter all use its word (``terminated``, ``timed_out``,
``failed``), so an item shown as terminated is found by ``status=terminated``; the state's
phase is then ``closed``.
A run cancelled through Temporal ran its own cancel path and published "cancelled": that word stands.

**Stuck.** A conversation or refund whose workflow tasks keep failing (a value over Temporal's
payload limit, workflow code that no longer matches its history after a deploy, a bug) is still
Running to Temporal, yet nothing in it moves until an operator acts. Two signs, both Temporal's own:

- the ``TemporalReportedProblems`` search attribute, which the server sets on a running
  workflow after ``system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute``
  consecutive workflow task failures or timeouts (2 on every server statekeeper starts or
  ships: ``starter.dev.server.DYNAMIC_CONFIG``, ``deploy/temporal/dynamicconfig``) and clears
  at the first workflow task that completes. Lists (``?status=stuck``), ``/healthz`` and
  ``statekeeper stuck`` read it through visibility, as the Web UI's view of task failures does;
- for one run, its description: a pending workflow task on its ``STUCK_ATTEMPT``-th attempt
  or later (a server without the attribute still answers this).

The RPCs are ``starter.client.core.ClientCore.stuck`` and ``starter.client.listing``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterable, Optional

from pydantic import BaseModel
from temporalio.client import WorkflowExecutionStatus
from temporalio.common import SearchAttributeKey

from starter.client.errors import ConversationError
from workflows.domain.records import ConversationStatus, Phase
from workflows.domain.state import ConversationState

if TYPE_CHECKING:  # core asks for the stuck signs below: imported at run time, a cycle
    from starter.client.core import ClientCore

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


# --- Stuck runs ---

REPORTED_PROBLEMS = SearchAttributeKey.for_keyword_list("TemporalReportedProblems")
"""Temporal's own search attribute: ``category=<kind>`` and ``cause=<enum name>`` while a
run's workflow tasks keep failing, unset otherwise."""
STUCK_CATEGORIES = ("category=WorkflowTaskFailed", "category=WorkflowTaskTimedOut")
"""The values of ``REPORTED_PROBLEMS`` that make a run stuck (those the Web UI's view lists)."""
STUCK_ATTEMPT = 3
"""A pending workflow task at this attempt or later: two in a row failed or timed out."""
TRIGGER_SETTING = "system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute"
"""The server's dynamic config key that turns ``REPORTED_PROBLEMS`` on (0: off)."""
TRIGGER_PROBLEMS = 2
"""Its value on the servers statekeeper starts or ships: marked at the second problem in a row."""

STUCK_CLAUSE = ('ExecutionStatus = "Running" AND `TemporalReportedProblems` IN ('
                + ", ".join(f'"{c}"' for c in STUCK_CATEGORIES) + ")")
"""Visibility clause of the stuck runs (the Web UI's "task failures" filter)."""
NOT_STUCK_CLAUSE = "`TemporalReportedProblems` IS NULL"
"""Visibility clause of the runs not reported stuck (a live status filter adds it: a stuck run
is listed as ``stuck``, so ``?status=active`` must not list it too)."""
STUCK = "stuck"
"""The status word lists and ``?status=`` use for a stuck run (reported, never stored)."""

CAUSE_WORDS = {
    "WorkflowTaskFailedCausePayloadsTooLarge": "a value it handles is over Temporal's size limit",
    "WorkflowTaskFailedCauseNonDeterministicError": "the deployed workflow code no longer matches what the run "
                                                    "already did (a deploy changed it)",
    "WorkflowTaskFailedCauseWorkflowWorkerUnhandledFailure": "the workflow code fails with an error",
    "WorkflowTaskFailedCauseGrpcMessageTooLarge": "a value it handles is over Temporal's message size limit",
    "WorkflowTaskFailedCauseBadSearchAttributes": "it sets search attributes the server refuses",
    "WorkflowTaskFailedCauseBadBinary": "its worker's build was marked bad",
}
"""Plain words of the workflow task failure causes an operator meets; others: ``GENERIC``."""
GENERIC = "its workflow code keeps failing"
TIMED_OUT = "its workflow tasks keep timing out (a worker takes too long on them or dies on them)"


def problems_of(attributes: Any) -> list[str]:
    """``REPORTED_PROBLEMS`` of a description's or a list item's ``typed_search_attributes``
    (empty when unset or unreadable)."""
    try:
        return list(attributes.get(REPORTED_PROBLEMS) or [])
    except Exception:  # noqa: BLE001 - a server that sends it untyped: the describe's attempt still tells
        return []


def reported_stuck(problems: Iterable[str]) -> bool:
    """True when ``problems`` (``REPORTED_PROBLEMS`` values) hold a stuck category."""
    return any(p in STUCK_CATEGORIES for p in problems)


def cause_words(problems: Iterable[str]) -> str:
    """What goes wrong, in plain words, from ``REPORTED_PROBLEMS`` values (``GENERIC`` without a cause)."""
    problems = list(problems)
    for problem in problems:
        name = problem.removeprefix("cause=")
        if problem.startswith("cause=") and name in CAUSE_WORDS:
            return CAUSE_WORDS[name]
    if "category=WorkflowTaskTimedOut" in problems:
        return TIMED_OUT
    return GENERIC


def since_words(since: Optional[datetime]) -> str:
    """``" since 2026-12-06 04:12:09 UTC"`` (when its workflow tasks began to fail), or ``""`` when unknown."""
    if since is None:
        return ""
    return f" since {since.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC"


def stuck_reason(what: str, problems: Iterable[str], attempt: int, since: Optional[datetime] = None) -> str:
    """The refusal text for stuck process ``what`` ("conversation desk-43", "refund r-1"):
    what happens, since when, and that nothing more is done until an operator acts. Never an
    exception name or an internal id."""
    tries = f", {attempt} attempts so far" if attempt >= STUCK_ATTEMPT else ""
    return (f"{what} is stuck{since_words(since)}: {cause_words(problems)}{tries}. Nothing more is done "
            "in it until an operator acts (`statekeeper stuck` lists it with what to do)")


def stuck_error(what: str, problems: Iterable[str], attempt: int, since: Optional[datetime] = None,
                message_id: Optional[str] = None) -> ConversationError:
    """``ConversationError`` ``stuck`` (409) for ``what``; with ``message_id`` (a message was
    sent), it says to send the message again with that id once the run moves again (Temporal
    may hold it meanwhile, or may have refused it: the same id is handled once either way)."""
    reason = stuck_reason(what, problems, attempt, since)
    if message_id is not None:
        reason += (f'; once it moves again, send this message again with message_id "{message_id}": it is '
                   "handled once")
    return ConversationError(reason, STUCK, message_id=message_id)


def description_stuck(description: Any) -> tuple[bool, list[str], int]:
    """``(stuck, problems, attempt)`` of a ``WorkflowExecutionDescription``: stuck when it runs
    and either ``REPORTED_PROBLEMS`` says so or its pending workflow task is on attempt
    ``STUCK_ATTEMPT`` or later (0: no pending workflow task)."""
    problems = problems_of(description.typed_search_attributes)
    raw = description.raw_description
    attempt = raw.pending_workflow_task.attempt if raw.HasField("pending_workflow_task") else 0
    running = description.status == WorkflowExecutionStatus.RUNNING
    return running and (reported_stuck(problems) or attempt >= STUCK_ATTEMPT), problems, attempt


class StuckRun(BaseModel):
    """One stuck run as ``statekeeper stuck`` lists it: ``process`` is ``conversation`` or
    ``refund`` (else the workflow type), ``process_id`` the id the API names it by, ``cause``
    the plain words of what fails, ``attempt`` its pending workflow task's attempt (0: not
    read), ``since`` when its workflow tasks began to fail (None: not read)."""

    process: str
    process_id: str
    workflow_id: str
    cause: str
    attempt: int = 0
    since: Optional[datetime] = None


def stuck_run(workflow_id: str, workflow_type: Optional[str], problems: Iterable[str], attempt: int = 0,
              since: Optional[datetime] = None) -> StuckRun:
    """The ``StuckRun`` of a listed execution (``support-<id>`` is conversation ``<id>``)."""
    process = {"SupportWorkflow": "conversation", "RefundWorkflow": "refund"}.get(workflow_type or "",
                                                                               workflow_type or "workflow")
    process_id = workflow_id.removeprefix("support-") if process == "conversation" else workflow_id
    return StuckRun(process=process, process_id=process_id, workflow_id=workflow_id, cause=cause_words(problems),
                    attempt=attempt, since=since)
