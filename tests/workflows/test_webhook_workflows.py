"""The webhook workflows on a real Temporal dev server with a real worker and a real receiver
(``tests.webhook_receiver``): events stored while no delivery workflow could be started (a worker
killed between the journal's commit and the start) are delivered by the sweeper
(``WebhookSweepWorkflow``), each once, signed; a second sweep starts nothing more; starting the
sweeper again keeps the one that runs; a delivery whose webhook is deleted while it waits between
attempts ends ``gone`` at its next attempt, its row with it."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime, timezone

from standardwebhooks import Webhook
from temporalio.client import WorkflowExecutionStatus

from activities.store.journal import JournalStore
from starter.runtime.webhooks import ensure_sweeper, webhook_store
from tests.webhook_receiver import receiving
from tests.workflow_harness import running_worker
from workflows.domain.journal import EventRecord, EventType, TurnRecord, event_id
from workflows.webhooks.workflow import (DeliveryOutcome, WebhookDeliveryWorkflow, delivery_workflow_id,
                                         sweep_workflow_id)


def _events(cid: str, *keys: str) -> TurnRecord:
    return TurnRecord(conversation_id=cid, events=[
        EventRecord(key=key, type=EventType.CONVERSATION_REPLIED, at=datetime.now(timezone.utc),
                    data={"conversation_id": cid}) for key in keys])


async def _until(check, seconds: float = 30.0):  # noqa: ANN001, ANN202
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = await check()
        if found:
            return found
        await asyncio.sleep(0.2)
    raise AssertionError("not within the deadline")


async def test_the_sweeper_delivers_what_no_one_started(temporal_env, settings):
    settings = settings.model_copy(update={"webhook_allow_loopback": True, "webhook_sweep_seconds": 1.0})
    journal = JournalStore(settings.resolved_journal_url())
    hooks = webhook_store(settings)
    with receiving() as receiver:
        async with running_worker(temporal_env, settings, journal=journal):
            journal.on_deliveries = None  # as if the worker died right after the commit
            made, secret = hooks.create("default", f"{receiver.url}/ok", ["*"])
            cid = f"swept-{uuid.uuid4().hex[:6]}"
            journal.record_turn(_events(cid, "reply:0:1", "reply:0:2"))
            assert len(hooks.unstarted()) == 2
            await asyncio.sleep(1.5)
            assert receiver.got("/ok") == []  # nothing starts them but the sweeper

            await ensure_sweeper(temporal_env.client, settings)
            await ensure_sweeper(temporal_env.client, settings)  # the one running is kept
            got = await _until(lambda: _arrived(receiver, 2))
            assert sorted(Webhook(secret).verify(r.body, r.headers)["id"] for r in got) == sorted(
                event_id(cid, k) for k in ("reply:0:1", "reply:0:2"))
            assert hooks.unstarted() == []
            await asyncio.sleep(2.5)  # more sweeps: nothing is started twice
            assert len(receiver.got("/ok")) == 2
            sweeper = temporal_env.client.get_workflow_handle(sweep_workflow_id(settings.task_queue))
            runs = [e async for e in temporal_env.client.list_workflows(
                f'WorkflowId = "{sweep_workflow_id(settings.task_queue)}"')]
            assert len(runs) == 1 and (await sweeper.describe()).status is WorkflowExecutionStatus.RUNNING
            await sweeper.terminate("test over")


async def _arrived(receiver, count: int):  # noqa: ANN001, ANN202
    got = receiver.got("/ok")
    return got if len(got) >= count else None


async def test_a_delivery_of_a_deleted_webhook_ends_at_its_next_attempt(temporal_env, settings):
    settings = settings.model_copy(update={"webhook_allow_loopback": True, "webhook_retry_initial_seconds": 1.0,
                                           "webhook_retry_max_interval_seconds": 1.0})
    journal = JournalStore(settings.resolved_journal_url())
    hooks = webhook_store(settings)
    with receiving() as receiver:
        receiver.down.set()
        async with running_worker(temporal_env, settings, journal=journal):
            made, _ = hooks.create("default", f"{receiver.url}/switch", ["*"])
            cid = f"deleted-{uuid.uuid4().hex[:6]}"
            journal.record_turn(_events(cid, "reply:0:1"))
            handle = temporal_env.client.get_workflow_handle_for(
                WebhookDeliveryWorkflow.run, delivery_workflow_id(made.webhook_id, event_id(cid, "reply:0:1")))
            await _until(lambda: _arrived_at(receiver, "/switch"))
            hooks.delete("default", made.webhook_id)
            assert await asyncio.wait_for(handle.result(), 30) == DeliveryOutcome.GONE
            assert hooks.deliveries("default", made.webhook_id) == []


async def _arrived_at(receiver, path: str):  # noqa: ANN001, ANN202
    return receiver.got(path) or None
