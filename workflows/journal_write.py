"""Writing a record to the journal from workflow code: first as a local activity (one marker
event instead of an activity's three events and the workflow task its completion needs), then,
when the journal's database did not answer it, as an activity retried in the background for
a bounded time (``JOURNAL_GIVE_UP``). A record the database refuses, or cannot take in time, is
dropped with a warning: the journal is an audit record kept beside the process, and a process
that stalled on it would fail the customer. Used by a conversation's ``JournalLog`` and a
refund's ``RefundEvents``. Deterministic workflow code.
"""

from __future__ import annotations

from typing import Any, Callable

from temporalio import workflow
from temporalio.exceptions import ActivityError, FailureError

from workflows.domain.errors import ErrorType
from workflows.options import (
    HEARTBEAT_TIMEOUT,
    JOURNAL_GIVE_UP,
    JOURNAL_LOCAL_RETRY,
    JOURNAL_LOCAL_TIMEOUT,
    JOURNAL_RETRY,
    JOURNAL_TIMEOUT,
)


async def write_journal(method: Callable[..., Any], record: Any, summary: str, described: str) -> None:
    """Write ``record`` with the journal activity ``method`` (``summary``: the Web UI's line);
    never raises: a dropped record is logged as ``described`` (ids and counts only, never the
    record's text) with the failure's type."""
    try:
        await workflow.execute_local_activity_method(
            method, record, start_to_close_timeout=JOURNAL_LOCAL_TIMEOUT, retry_policy=JOURNAL_LOCAL_RETRY,
            summary=summary)
        return
    except FailureError as err:  # a local activity's failure may come without its ActivityError wrapper
        if cause_name(err) == ErrorType.INVALID_JOURNAL_RECORD.value:
            workflow.logger.warning("%s dropped: %s", described, cause_name(err))
            return
        # the journal's database did not answer: the activity retries in the background
    try:
        await workflow.execute_activity_method(
            method, record, start_to_close_timeout=JOURNAL_TIMEOUT, schedule_to_close_timeout=JOURNAL_GIVE_UP,
            heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=JOURNAL_RETRY, summary=summary)
    except ActivityError as err:
        workflow.logger.warning("%s dropped: %s", described, cause_name(err))


def cause_name(err: BaseException) -> Any:
    """The type of ``err``'s cause (our ``ErrorType`` value, or the exception's class name)."""
    cause = err.cause if getattr(err, "cause", None) is not None else err
    return getattr(cause, "type", None) or type(cause).__name__
