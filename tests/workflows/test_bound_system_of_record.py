"""A conversation is bound to the system of record that answered its first tool call: a
worker on another database that later takes its calls refuses them before acting, so a
confirmed cancel never lands in the wrong database (issue 6, one system of record per
task queue; the startup check only sees workers that are polling right now).

Two workers on a real Temporal dev server, one after the other on the same task queue,
each on its own SQLite database.
"""

from __future__ import annotations

import uuid

from tests.policy_fixtures import EMAIL, PENDING
from tests.workflow_harness import order_details, running_worker


async def test_a_worker_on_another_database_refuses_a_bound_conversation(temporal_env, settings, tmp_path):
    other = settings.model_copy(update={"database_url": f"sqlite:///{tmp_path / 'other.sqlite'}"})
    cid = f"bound-{uuid.uuid4().hex[:6]}"
    async with running_worker(temporal_env, settings) as (client, first):
        await client.start_conversation(cid)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        shown = await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        assert shown.awaiting_confirmation
        bound = (await client.state(cid)).system_of_record
        assert bound  # the fingerprint of the first worker's database
    async with running_worker(temporal_env, other) as (client, second):
        reply = await client.send_message(cid, "yes")
        state = await client.state(cid)
        assert state.system_of_record == bound and reply.status == "active"
        [op] = state.completed_operations
        assert not op.ok and "another system of record" in op.result
        assert second.ledger_entries("main") == [] and order_details(second, PENDING)["status"] == "pending"
    assert first.ledger_entries("main") == [] and order_details(first, PENDING)["status"] == "pending"
