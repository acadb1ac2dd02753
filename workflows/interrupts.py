"""Cancellable waits: an in-flight model call or read stops as soon as the conversation
is cancelled (by the ``cancel`` signal or by Temporal's own cancellation); and starting a call
as a local activity or an activity, with one failure type either way.

Writes never go through here: an irreversible write in flight is awaited, never
abandoned (README, "Cancellation"). Deterministic: workflow code only.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Optional, TypeVar

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, FailureError

from workflows.domain.contracts import CancelRequest
from workflows.options import HEARTBEAT_TIMEOUT

T = TypeVar("T")


class Interrupted(Exception):
    """A cancellable activity was cancelled because the conversation is being cancelled;
    the turn stops and the cancel path reports what happened."""


async def cancellable(handle: "workflow.ActivityHandle[T]",
                      cancel_requested: Callable[[], Optional[CancelRequest]]) -> T:
    """Await ``handle`` (a started model or read activity) unless a cancel arrives first.

    Returns the activity's result; raises the activity's ``ActivityError`` when it fails;
    raises ``Interrupted`` when a cancel arrived first (the activity is cancelled: it
    heartbeats, so its worker learns of it within a heartbeat). A cancel that was already
    pending when the activity started interrupts it at once, and so does one that reaches the
    workflow together with the result: a local activity's result and a cancel sent in its last
    second arrive in the same workflow task, and the cancel, accepted first, wins.
    """
    await workflow.wait_condition(lambda: handle.done() or cancel_requested() is not None)
    if handle.done() and (cancel_requested() is None or not workflow.patched(CANCEL_WINS_PATCH)):
        return handle.result()
    if not handle.done():
        handle.cancel()
    await _settle(handle)
    raise Interrupted()


async def see_cancel_after_local_result(cancel_requested: Callable[[], Optional[CancelRequest]]) -> None:
    """Raise ``Interrupted`` when a cancel was sent while a local activity ran. Its result
    resolves inside the workflow task that started it, so a cancel Temporal accepted after that
    task's last heartbeat is not delivered yet: ending the workflow task (a 1 ms timer) delivers
    it first. Called before a local model call's proposal closes the conversation (a transfer
    opens a ticket), where a cancel accepted first must win."""
    await workflow.sleep(timedelta(milliseconds=1))
    if cancel_requested() is not None:
        raise Interrupted()


CANCEL_WINS_PATCH = "cancel-wins-over-result"
"""``workflow.patched`` id: runs of 1.0.0 replay a result that arrived with a cancel as used, and
act on a local model call's transfer or end without first seeing a cancel sent meanwhile
(docs/releasing.md)."""


async def _settle(handle: Awaitable[Any]) -> None:
    # the cancelled activity resolves with a CancelledError (or its last result): either way
    # it no longer matters, only that nothing of it is left pending in this workflow task
    try:
        await handle
    except BaseException:  # noqa: BLE001
        pass


def start_local_or_activity(method: Callable[..., Awaitable[T]], arg: Any, *, local: bool,
                            start_to_close_timeout: timedelta, retry_policy: RetryPolicy,
                            summary: str) -> "workflow.ActivityHandle[T]":
    """Start ``method(arg)`` as a local activity when ``local`` (the caller's input
    says so), else as an activity that heartbeats (``HEARTBEAT_TIMEOUT``); the same timeout,
    retry policy and summary either way. Await the handle through
    ``local_failure_as_activity_error`` to catch ``ActivityError`` in both cases."""
    if local:
        return workflow.start_local_activity_method(method, arg, start_to_close_timeout=start_to_close_timeout,
                                                    retry_policy=retry_policy, summary=summary)
    return workflow.start_activity_method(method, arg, heartbeat_timeout=HEARTBEAT_TIMEOUT,
                                          start_to_close_timeout=start_to_close_timeout, retry_policy=retry_policy,
                                          summary=summary)


async def local_failure_as_activity_error(awaitable: Awaitable[T], activity_type: str) -> T:
    """Await ``awaitable``; a local activity's failure (which arrives without the
    ``ActivityError`` wrapper a regular activity's has) is re-raised wrapped in one, so callers
    catch one type whichever way the activity ran."""
    try:
        return await awaitable
    except ActivityError:
        raise
    except FailureError as err:
        raise ActivityError(f"{activity_type} failed", scheduled_event_id=0, started_event_id=0, identity="",
                            activity_type=activity_type, activity_id="", retry_state=None) from err
