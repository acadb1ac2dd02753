"""The webhooks' parts as ``Settings`` describe them, shared by the worker, the HTTP API, the
Python client and the CLI: the store with its secret seal (the payload codec's keys), the
allowance of the SSRF guard, the retry schedule, and the sweeper each worker makes sure runs."""

from __future__ import annotations

import logging
from datetime import timedelta

from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy

from activities.store.webhooks import SecretSeal, WebhookStore
from activities.webhooks.addresses import Allowance
from activities.webhooks.starts import DeliveryStarter
from settings import Settings
from workflows.webhooks.workflow import RetrySchedule, SweepInput, WebhookSweepWorkflow, sweep_workflow_id

log = logging.getLogger("statekeeper.webhooks")


def allowance(settings: Settings) -> Allowance:
    """Which non-public addresses webhooks may reach (``STATEKEEPER_WEBHOOK_ALLOW_*``)."""
    return Allowance(loopback=settings.webhook_allow_loopback, private=settings.webhook_allow_private)


def retry_schedule(settings: Settings) -> RetrySchedule:
    """The deliveries' retry schedule (``STATEKEEPER_WEBHOOK_RETRY_*``, ``..._GIVE_UP_SECONDS``)."""
    return RetrySchedule(initial_seconds=settings.webhook_retry_initial_seconds,
                         maximum_interval_seconds=settings.webhook_retry_max_interval_seconds,
                         give_up_seconds=settings.webhook_give_up_seconds)


def secret_seal(settings: Settings) -> SecretSeal:
    """Sealing with the payload codec's keys (its current key seals; every key opens); secrets
    are kept as they are when the codec is off or this process has no key (it then makes none)."""
    from starter.runtime.codec import CodecKeyError, codec_keyring
    from starter.runtime.preflight import StartupRefused

    try:
        keyring = codec_keyring(settings)
    except (StartupRefused, CodecKeyError):
        keyring = None
    return SecretSeal(None) if keyring is None else SecretSeal(keyring.keys, keyring.current)


def webhook_store(settings: Settings) -> WebhookStore:
    """The subscriptions and deliveries in ``settings``' journal database."""
    return WebhookStore(settings.resolved_journal_url(), secret_seal(settings))


def delivery_starter(client: Client, settings: Settings, store: WebhookStore) -> DeliveryStarter:
    """Starts delivery workflows on ``settings.task_queue`` with the configured schedule."""
    return DeliveryStarter(client, settings.task_queue, store, retry_schedule(settings))


async def ensure_sweeper(client: Client, settings: Settings) -> None:
    """Start the task queue's ``WebhookSweepWorkflow`` unless it runs (one per task queue,
    whichever worker starts it first). A failure is logged: the deliveries started right after
    each commit do not need it, and the next worker start tries again."""
    try:
        await client.start_workflow(
            WebhookSweepWorkflow.run, SweepInput(interval_seconds=settings.webhook_sweep_seconds),
            id=sweep_workflow_id(settings.task_queue), task_queue=settings.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE, rpc_timeout=timedelta(seconds=10))
    except Exception as err:  # noqa: BLE001 (logged; see above)
        log.warning("webhooks: the sweeper of %s was not started: %s", settings.task_queue, type(err).__name__)
