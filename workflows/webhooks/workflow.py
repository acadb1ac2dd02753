"""Webhook deliveries as Temporal workflows: ``WebhookDeliveryWorkflow`` sends one event to one
subscription, at least once, retrying with backoff for a day and more; ``WebhookSweepWorkflow``
(one per task queue, started by every worker) starts any delivery whose workflow a crash left
unstarted.

One workflow per delivery, so deliveries never wait for each other: a receiver that is down,
slow or refuses one event holds up nothing else (a receiver orders events by ``sequence``).
Its workflow id derives from the delivery (``delivery_workflow_id``: subscription and event),
so a second start of the same delivery is refused by Temporal while the first runs or is
retained, and a manual retry starts a new run under the same id.

The attempt is the ``deliver`` activity (``activities.webhooks.delivery``): it reads the
subscription and the event afresh, checks the URL's addresses, signs and POSTs, and records the
attempt in the delivery's row. Temporal owns the retries (``delivery_retry``): from
``RetrySchedule.initial_seconds``, doubling, at most ``maximum_interval_seconds`` apart, until
``give_up_seconds`` after the first attempt; then ``give_up`` marks the delivery failed. A
deleted subscription or an erased event ends it at once (``WebhookGone``, non-retryable).
Deterministic workflow code: the schedule comes in the input (the starter reads settings).
"""

from __future__ import annotations

from datetime import timedelta
from enum import Enum

from pydantic import BaseModel, Field
from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from workflows.domain.errors import ErrorType
from workflows.options import HEARTBEAT_TIMEOUT

ATTEMPT_TIMEOUT = timedelta(seconds=30)
"""Start-to-close of one attempt: the request's own deadline (``Settings.webhook_timeout_seconds``,
at most 30 s) plus the database reads and the attempt's record."""
SETTLE_TIMEOUT = timedelta(seconds=10)
SETTLE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                           maximum_interval=timedelta(minutes=5))
"""Marking a delivery failed is retried until the database answers (a row update, idempotent)."""
SWEEP_TIMEOUT = timedelta(seconds=60)
SWEEP_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                          maximum_interval=timedelta(seconds=30), maximum_attempts=3)
"""A sweep that cannot reach the database gives up after three tries; the next sweep catches up."""
SWEEPS_PER_RUN = 100
"""Sweeps before the sweeper continues as new (its history stays around a thousand events)."""


class RetrySchedule(BaseModel):
    """When a delivery's attempts run, in seconds (``Settings.webhook_retry_*``): the first
    retry ``initial_seconds`` after a failed attempt, each wait doubling up to
    ``maximum_interval_seconds``, none after ``give_up_seconds`` from the first attempt."""

    initial_seconds: float = Field(default=5.0, gt=0)
    maximum_interval_seconds: float = Field(default=3600.0, gt=0)
    give_up_seconds: float = Field(default=25 * 3600.0, gt=0)


class DeliveryInput(BaseModel):
    """Input of ``WebhookDeliveryWorkflow``: deliver event ``event_id`` to subscription ``webhook_id``."""

    webhook_id: str = Field(min_length=1, max_length=40)
    event_id: str = Field(min_length=1, max_length=40)
    retry: RetrySchedule = Field(default_factory=RetrySchedule)


class DeliveryAttempt(BaseModel):
    """Input of ``deliver`` and ``give_up``: the delivery (subscription, event)."""

    webhook_id: str = Field(min_length=1, max_length=40)
    event_id: str = Field(min_length=1, max_length=40)


class DeliveryOutcome(str, Enum):
    """How a delivery workflow ended."""

    DELIVERED = "delivered"
    FAILED = "failed"
    """Its retries ran out; the delivery's row says failed (``POST .../retry`` starts it again)."""
    GONE = "gone"
    """Its subscription was deleted or its event erased."""


class SweepInput(BaseModel):
    """Input of ``WebhookSweepWorkflow``: sweep every ``interval_seconds``, starting the deliveries
    unstarted for ``grace_seconds`` or more (with the retry schedule of the worker that sweeps)."""

    interval_seconds: float = Field(default=30.0, gt=0)
    grace_seconds: float = Field(default=10.0, ge=0)


class SweepRequest(BaseModel):
    """Input of ``sweep``: start the deliveries unstarted for ``grace_seconds`` or more."""

    grace_seconds: float = Field(ge=0)


class WebhookActivitiesApi:
    """The delivery activities, as a typed interface (``activities.webhooks.delivery``)."""

    @activity.defn
    async def deliver(self, req: DeliveryAttempt) -> int:
        """One attempt; returns the receiver's 2xx status. Raises ``ApplicationError``
        ``WebhookNotAccepted`` (retryable) or ``WebhookGone`` (non-retryable)."""
        raise NotImplementedError

    @activity.defn
    async def give_up(self, req: DeliveryAttempt) -> None:
        """Mark the delivery failed: its retries ran out."""
        raise NotImplementedError

    @activity.defn
    async def sweep(self, req: SweepRequest) -> int:
        """Start the deliveries whose workflow does not exist yet; returns how many it started."""
        raise NotImplementedError


def delivery_workflow_id(webhook_id: str, event_id: str) -> str:
    """The workflow id of delivery (``webhook_id``, ``event_id``)."""
    return f"webhook-delivery:{webhook_id}:{event_id}"


def sweep_workflow_id(task_queue: str) -> str:
    """The workflow id of the sweeper of ``task_queue``."""
    return f"webhook-sweep:{task_queue}"


def delivery_retry(schedule: RetrySchedule) -> RetryPolicy:
    """The attempts' ``RetryPolicy``: no attempt cap (``give_up_seconds`` bounds them, as the
    activity's schedule-to-close timeout); a deleted subscription is not retried."""
    return RetryPolicy(initial_interval=timedelta(seconds=schedule.initial_seconds), backoff_coefficient=2.0,
                       maximum_interval=timedelta(seconds=schedule.maximum_interval_seconds), maximum_attempts=0,
                       non_retryable_error_types=[ErrorType.WEBHOOK_GONE.value])


def _cause_type(err: BaseException) -> object:
    cause = err.cause if err.cause is not None else err
    return cause.type if isinstance(cause, ApplicationError) else None


@workflow.defn
class WebhookDeliveryWorkflow:
    """One delivery: attempts until the receiver takes it or the schedule gives up."""

    @workflow.run
    async def run(self, inp: DeliveryInput) -> DeliveryOutcome:
        """Deliver; returns how it ended (never fails: a failed delivery is its row's status)."""
        attempt = DeliveryAttempt(webhook_id=inp.webhook_id, event_id=inp.event_id)
        try:
            await workflow.execute_activity_method(
                WebhookActivitiesApi.deliver, attempt, start_to_close_timeout=ATTEMPT_TIMEOUT,
                schedule_to_close_timeout=timedelta(seconds=inp.retry.give_up_seconds),
                heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=delivery_retry(inp.retry),
                summary=f"deliver {inp.event_id}")
            return DeliveryOutcome.DELIVERED
        except ActivityError as err:
            if _cause_type(err) == ErrorType.WEBHOOK_GONE.value:
                return DeliveryOutcome.GONE
        await workflow.execute_activity_method(
            WebhookActivitiesApi.give_up, attempt, start_to_close_timeout=SETTLE_TIMEOUT, retry_policy=SETTLE_RETRY,
            summary=f"mark {inp.event_id} failed")
        return DeliveryOutcome.FAILED


@workflow.defn
class WebhookSweepWorkflow:
    """The sweeper of one task queue: every ``interval_seconds`` it starts the deliveries left
    unstarted (a worker that died between storing an event and starting its deliveries)."""

    @workflow.run
    async def run(self, inp: SweepInput) -> None:
        """Sweep ``SWEEPS_PER_RUN`` times, then continue as new (runs until terminated)."""
        request = SweepRequest(grace_seconds=inp.grace_seconds)
        for _ in range(SWEEPS_PER_RUN):
            try:
                await workflow.execute_activity_method(
                    WebhookActivitiesApi.sweep, request, start_to_close_timeout=SWEEP_TIMEOUT,
                    heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=SWEEP_RETRY, summary="start unstarted deliveries")
            except ActivityError as err:
                workflow.logger.warning("webhook sweep failed: %s", _cause_type(err))
            await workflow.sleep(timedelta(seconds=inp.interval_seconds))
        workflow.continue_as_new(inp)
