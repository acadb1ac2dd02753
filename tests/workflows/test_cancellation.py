"""Cancelling a conversation (the cancel signal): while a write awaits its confirmation
nothing is written and a later yes is refused; during a running write the write that
committed is recorded, exactly once.

SupportWorkflow on a real Temporal dev server, a real worker and SQLite.

These cases come from an adversarial review of the code of that day; they are kept as
regression tests.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from starter.client.conversations import ConversationError
from tests.policy_fixtures import EMAIL, PENDING
from tests.workflow_harness import order_details, running_worker


async def test_cancel_signal_while_awaiting_confirmation_writes_nothing(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        cid = await client.start_conversation(f"cancel-pending-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        r = await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        assert r.awaiting_confirmation
        await client.cancel(cid, "hung up")
        outcome = await asyncio.wait_for(client.outcome(cid), 20)
        assert outcome.status == "cancelled" and outcome.state.pending_confirmation is None
        with pytest.raises(ConversationError) as err:
            await client.send_message(cid, "yes")
        assert err.value.kind == "finished"
        assert order_details(backend, PENDING)["status"] == "pending" and backend.ledger_entries("main") == []


async def test_cancel_signal_during_a_running_write_records_it(temporal_env, settings, tmp_path):
    marker = tmp_path / "committed.marker"
    async with running_worker(temporal_env, settings, pause_after_write=(1.5, marker)) as (client, backend):
        cid = await client.start_conversation(f"cancel-running-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        r = await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        assert r.awaiting_confirmation
        yes = asyncio.create_task(client.send_message(cid, "yes"))
        while not marker.exists():
            await asyncio.sleep(0.05)
        await client.cancel(cid, "hung up mid-write")
        answer = await asyncio.wait_for(yes, 30)
        outcome = await asyncio.wait_for(client.outcome(cid), 30)
        assert outcome.status == "cancelled"
        [op] = outcome.state.completed_operations
        assert op.ok and order_details(backend, PENDING)["status"] == "cancelled"
        assert len(backend.ledger_entries("main")) == 1
        # the reply to the yes says the conversation was cancelled and what completed before it stopped
        assert answer.text.startswith("The conversation was cancelled.")
        assert f"Done: Cancel order {PENDING}" in answer.text
