"""Reading a conversation's Temporal history for the safe-replay decision (``starter.ops.replay_check``):
whether its original input decodes, the effects it invoked (activities that write, with
their keys, and the reads), how each ended, the refund children it started, the operators'
resolutions it accepted, and the reset points (completed workflow tasks).

Pure over a fetched ``WorkflowHistory`` and the client's data converter (payloads may be
encrypted: decoding needs the same codec key as the workers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import WorkflowHistory
from temporalio.converter import DataConverter

from starter.client.failure_words import failure_kind
from starter.runtime.system_of_record import services_in_identity
from workflows.domain.contracts import EmailRequest, SupportInput, TicketRequest, WriteToolRequest
from workflows.conversation.resolution import ResolveOutcome

RESET_CAUSE = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW

WRITE_ACTIVITIES: dict[str, type] = {
    "run_write_tool": WriteToolRequest,
    "send_customer_email": EmailRequest,
    "open_ticket": TicketRequest,
}
"""Activities with an effect on a system, and their input models (every other activity of
statekeeper reads, calls the model, or upserts the journal by key: harmless to run again)."""

_CLOSE = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: ("completed", "activity_task_completed_event_attributes"),
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: ("failed", "activity_task_failed_event_attributes"),
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: ("timed_out", "activity_task_timed_out_event_attributes"),
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: ("canceled", "activity_task_canceled_event_attributes"),
}


@dataclass
class Invoked:
    """One activity a workflow scheduled: ``workflow_id``, ``event_id`` of its scheduling,
    ``activity`` type, ``request`` (the decoded input model of a write activity, else None),
    ``ended`` (``completed``, ``failed``, ``timed_out``, ``canceled`` or ``in_flight``) and
    ``failure_type`` (the ``ApplicationError`` type of a failure, e.g. ``OutcomeUnknown``)."""

    workflow_id: str
    event_id: int
    activity: str
    request: Any = None
    ended: str = "in_flight"
    failure_type: Optional[str] = None

    @property
    def is_write(self) -> bool:
        """True for an activity with an effect on a system (``WRITE_ACTIVITIES``)."""
        return self.activity in WRITE_ACTIVITIES


@dataclass
class RunHistory:
    """What one run's history says: ``input`` (the decoded ``SupportInput``, or None with
    ``input_problem``), ``invoked`` activities, ``children`` (workflow ids of started child
    workflows), ``resolved_steps`` (step ids of accepted ``resolve_outcome`` updates),
    ``reset_points`` (event ids of completed workflow tasks), ``local_activities`` (markers:
    reads and journal records, run inside workflow tasks), ``events`` and ``services`` (the
    services fingerprint, ``starter.runtime.system_of_record.services_fingerprint``, of the last worker
    that completed a workflow task: which external services its writes went to; None for a
    worker that did not say)."""

    workflow_id: str
    input: Optional[Any] = None
    input_problem: Optional[str] = None
    invoked: list[Invoked] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    resolved_steps: list[str] = field(default_factory=list)
    reset_points: list[int] = field(default_factory=list)
    local_activities: int = 0
    replaying_reset: bool = False  # reset here, and no workflow task has completed since
    events: int = 0
    services: Optional[str] = None  # the services fingerprint of the last worker that completed a workflow task


async def _decode(converter: DataConverter, payloads: Any, model: type) -> Any:
    values = await converter.decode(list(payloads.payloads), [model])
    return values[0]


def _failure_type(failure: Any) -> Optional[str]:
    """The ``ApplicationError`` type of a failure or of its first cause that has one."""
    while failure is not None and failure.ByteSize():
        if failure.HasField("application_failure_info") and failure.application_failure_info.type:
            return failure.application_failure_info.type
        if failure.HasField("timeout_failure_info"):
            return "Timeout"
        failure = failure.cause if failure.HasField("cause") else None
    return None


async def read_run(history: WorkflowHistory, converter: DataConverter, input_model: Optional[type] = SupportInput
                   ) -> RunHistory:
    """``RunHistory`` of ``history``; ``input_model``: what the first event's input must
    decode as (None: not checked, e.g. a refund child)."""
    run = RunHistory(workflow_id=history.workflow_id, events=len(history.events))
    by_scheduled: dict[int, Invoked] = {}
    resolving: dict[str, str] = {}  # update id → step id, accepted resolutions
    for event in history.events:
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED and input_model is not None:
            try:
                run.input = await _decode(converter, event.workflow_execution_started_event_attributes.input,
                                          input_model)
            except Exception as err:  # noqa: BLE001 - any failure means: the input is not known
                run.input_problem = f"the first event's input does not decode ({failure_kind(err)})"
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            invoked = Invoked(workflow_id=history.workflow_id, event_id=event.event_id,
                              activity=attrs.activity_type.name)
            model = WRITE_ACTIVITIES.get(invoked.activity)
            if model is not None:
                try:
                    invoked.request = await _decode(converter, attrs.input, model)
                except Exception:  # noqa: BLE001 - an undecodable write is reported as such
                    invoked.request = None
            by_scheduled[event.event_id] = invoked
            run.invoked.append(invoked)
        elif kind in _CLOSE:
            ended, name = _CLOSE[kind]
            attrs = getattr(event, name)
            invoked = by_scheduled.get(attrs.scheduled_event_id)
            if invoked is not None:
                invoked.ended = ended
                if ended == "failed":
                    invoked.failure_type = _failure_type(attrs.failure)
                elif ended == "timed_out":
                    invoked.failure_type = "Timeout"
        elif kind == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            child = event.start_child_workflow_execution_initiated_event_attributes.workflow_id
            if child not in run.children:
                run.children.append(child)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            request = event.workflow_execution_update_accepted_event_attributes.accepted_request
            if request.input.name == "resolve_outcome":
                try:
                    resolving[request.meta.update_id] = (await _decode(converter, request.input.args,
                                                                       ResolveOutcome)).step_id
                except Exception:  # noqa: BLE001 - not a resolution this code can read
                    pass
        elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
            attrs = event.workflow_execution_update_completed_event_attributes
            step = resolving.pop(attrs.meta.update_id, None)
            if step is not None and attrs.outcome.HasField("success"):  # the handler applied it
                run.resolved_steps.append(step)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            run.reset_points.append(event.event_id)
            run.replaying_reset = False
            run.services = services_in_identity(event.workflow_task_completed_event_attributes.identity) or run.services
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            if event.workflow_task_failed_event_attributes.cause == RESET_CAUSE:
                run.replaying_reset = True
        elif kind == EventType.EVENT_TYPE_MARKER_RECORDED:
            if event.marker_recorded_event_attributes.marker_name == "core_local_activity":
                run.local_activities += 1
    return run
