"""An operator resolves an escalated unknown outcome.

A write whose outcome could not be shown leaves its step ``unknown``, opens a ticket and
escalates the conversation (``workflows.conversation.execute``). The conversation then
waits (up to ``SupportInput.resolution_wait_seconds``) instead of completing: an operator
who checked the system sends the ``resolve_outcome`` update — ``applied`` or
``not_applied``, with their name and a note — and the step becomes ``done`` or ``failed``,
the resolution (who, when, what the user was told) is kept in the state's ``resolutions``,
the user is told, and, once no unknown step is left, the conversation is active again and
goes on from there. The validator refuses an unknown step id, a step whose
outcome is not unknown and a second resolution (``ErrorType.RESOLUTION_REFUSED``); a
refused update never enters history.

Pure functions plus ``ResolutionGate``, the collaborator ``SupportWorkflow`` holds for the
wait and the update; deterministic, imported inside the workflow sandbox.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any, Callable, Literal, Optional

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.exceptions import ApplicationError

from workflows.domain import replies
from workflows.domain.policy.approvals import APPROVER_PATTERN
from workflows.conversation.cancellation import escalated_with_cancel
from workflows.domain.contracts import CancelRequest
from workflows.domain.errors import ErrorType
from workflows.domain.journal import EntryKind
from workflows.domain import transitions as tr
from workflows.domain.records import OutcomeResolution, Phase, Step, StepStatus
from workflows.domain.state import ConversationState
from workflows.domain.transitions import unresolved  # noqa: F401  (re-exported: the resolution's vocabulary)
from workflows.domain.user_text import control_problem

class ResolveOutcome(BaseModel):
    """Input of the ``resolve_outcome`` update: the step (``Step.step_id``, as in the state),
    what the operator found in the system, their name (an id like an approver's), a note
    (1-1000 characters) and, set by the API or CLI, the authenticated caller."""

    step_id: str = Field(min_length=1, max_length=300)
    outcome: Literal["applied", "not_applied"]
    operator: str = Field(min_length=1, max_length=128, pattern=APPROVER_PATTERN)
    note: str = Field(min_length=1, max_length=1000)
    actor: Optional[str] = Field(default=None, max_length=200)


def _refused(message: str) -> ApplicationError:
    return ApplicationError(message, type=ErrorType.RESOLUTION_REFUSED.value, non_retryable=True)


def check_resolution(state: Any, request: ResolveOutcome) -> Step:
    """The step ``request`` resolves. Raises ``ApplicationError`` ``ResolutionRefused``
    (non-retryable) when no step has that id, the step was already resolved, or its outcome
    is not unknown (each says which)."""
    step = next((s for s in state.steps if s.step_id == request.step_id), None)
    if step is None:
        raise _refused(f"this conversation has no step {request.step_id}")
    earlier = next((r for r in state.resolutions if r.step_id == step.step_id), None)
    if earlier is not None:
        raise _refused(f"step {step.step_id} was already resolved as {earlier.outcome} by {earlier.operator}")
    if step.status is not StepStatus.UNKNOWN:
        raise _refused(f"step {step.step_id} is {step.status.value}, not unknown: only an unknown outcome "
                       "can be resolved")
    return step


def check_resolution_text(request: ResolveOutcome) -> None:
    """Refuse (``ResolutionRefused``, non-retryable) a resolution whose note, step id or actor
    has a control character (``workflows.domain.user_text``): for the update validator, the last edge
    before the state and history (the client and the API refuse it too; a caller of Temporal
    itself does not pass through them). Not in ``check_resolution``: the handler re-runs that
    on replay, where a resolution accepted before this check must still apply."""
    for text, what in ((request.note, "the note"), (request.step_id, "the step id"), (request.actor, "the actor")):
        problem = control_problem(text, what) if text else None
        if problem is not None:
            raise _refused(problem)


def apply_resolution(state: Any, step: Step, request: ResolveOutcome, now: datetime) -> OutcomeResolution:
    """Resolve ``step`` (checked by ``check_resolution``): done or failed with the operator's
    note, the resolution recorded, and the conversation re-opened when it was escalated and
    no unknown step is left (``transitions.resolve_step``). Returns the record (``told``: what
    the user is told)."""
    applied = request.outcome == "applied"
    record = OutcomeResolution(step_id=step.step_id, operation_id=step.operation_id, outcome=request.outcome,
                               operator=request.operator, actor=request.actor, note=request.note,
                               resolved_at=now, told=replies.resolved(step.detail or step.name, applied))
    tr.resolve_step(state, step, record)
    return record


AWAITING_RESOLUTION_TEXT = ("A colleague is checking whether your earlier request went through; you will be "
                            "told here as soon as they have. This message was not taken: please send it again "
                            "after that.")
"""The refusal of a message while the conversation waits for an operator's resolution (the
validator's, ``ErrorType.AWAITING_RESOLUTION``): not "finished", which would send the user to
a new conversation to repeat a request whose outcome is being checked."""


class ResolutionGate:
    """An escalated conversation's wait for an operator's resolution (``wait``, for the main
    loop) and the resolutions themselves (``check`` and ``resolve``, for the ``resolve_outcome``
    update of ``SupportWorkflow``, which delegates here). Works on the conversation's
    ``state``; ``cancel_request()`` is the pending cancel, if any; ``tell(text, kind)`` tells the
    user outside a turn (a notice also opens their next reply)."""

    def __init__(self, state: ConversationState, cancel_request: Callable[[], Optional[CancelRequest]],
                 tell: Callable[[str, EntryKind], None], write_timeout_seconds: float) -> None:
        self._state = state
        self._cancel_request = cancel_request
        self._tell = tell
        self._write_timeout_seconds = write_timeout_seconds

    def check(self, request: ResolveOutcome) -> None:
        """The update's validator: refuse (``ResolutionRefused``) a resolution whose text has a
        control character, of an unknown step, a step that is not unknown, or a second one."""
        check_resolution_text(request)
        check_resolution(self._state, request)

    def resolve(self, request: ResolveOutcome) -> OutcomeResolution:
        """Apply the operator's resolution and tell the user; returns its record."""
        step = check_resolution(self._state, request)  # again: two accepted in one task both passed
        record = apply_resolution(self._state, step, request, workflow.now())
        if self._cancel_request() is not None:  # re-opened while a cancel is pending: the cancel path closes it
            tr.request_cancel(self._state)
        self._tell(record.told, EntryKind.NOTICE)
        return record

    async def wait(self, wait_seconds: float) -> bool:
        """After the main loop: an escalated conversation with an unresolved unknown step
        waits up to ``wait_seconds`` for an operator (or a cancel). True when a resolution
        re-opened it (the loop goes on); False at once for anything else, or when the wait ran
        out. A cancel that ends the wait is honoured: its summary is told, its reason joins
        ``ended_reason`` and its rollback runs."""
        state = self._state
        if self._cancel_request() is not None or wait_seconds <= 0 or not tr.await_resolution(state):
            return False
        try:
            await workflow.wait_condition(lambda: state.phase is not Phase.AWAITING_RESOLUTION,
                                          timeout=wait_seconds, timeout_summary="operator resolution")
        except asyncio.TimeoutError:
            tr.stop_awaiting_resolution(state)
            return False
        cancel = self._cancel_request()
        if cancel is not None and not state.is_open():
            # said and done as for a cancel during the write (its rollback too); the step stays unknown
            told = await escalated_with_cancel(state, cancel, "", self._write_timeout_seconds)
            self._tell(told.strip(), EntryKind.CANCELLATION)
        return state.phase.serving
