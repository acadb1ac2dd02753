"""Database failures around a write: when the system of record becomes unreadable right
after a refund commits, or refuses writes (so the escalation ticket cannot be written
either), the conversation stays active or escalates; it never fails.

SupportWorkflow on a real Temporal dev server, a real worker and SQLite, with the
fault injected through the tool port (``tests.faults``) or the database itself; only
the model is faked, at its boundary.

These cases come from an adversarial review of the code of that day; each docstring
describes the defect as it was found (file:line references are as of the review). Both
are fixed now, and each test keeps guarding against its return.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from starter.client.conversations import ConversationError
from tests.policy_fixtures import CUSTOMER, EMAIL, PENDING
from tests.workflow_harness import ListBrain, call, running_worker
from workflows.conversation.workflow import support_workflow_id


async def test_refresh_read_failure_after_a_refund_does_not_fail_the_conversation(temporal_env, settings,
                                                                                          tmp_path):
    """After a refund write commits, SupportWorkflow._execute refreshes the user with an
    un-guarded activity call (support.py: `await self._read(refresh)` outside the try).
    If that read cannot run, the ActivityError escapes `run` and the whole conversation
    FAILS (the user gets a 409 'has finished'), although the write is done and 'read
    failures become replies' elsewhere. The fault: the store becomes unreadable right
    after the commit (the test's stand-in for a database outage)."""
    marker = tmp_path / "committed.marker"
    brain = ListBrain([
        call("find_user_id_by_email", email=EMAIL),
        call("get_user_details", user_id=CUSTOMER),
        call("get_order_details", order_id=PENDING),
        call("cancel_pending_order", order_id=PENDING, reason="no longer needed"),
    ])
    async with running_worker(temporal_env, settings, brain=brain, pause_after_write=(2.0, marker)) as (client, backend):
        cid = await client.start_conversation(f"refresh-fail-{uuid.uuid4().hex[:6]}")
        r = await client.send_message(cid, f"my email is {EMAIL}, cancel {PENDING}")
        assert r.awaiting_confirmation
        yes = asyncio.create_task(client.send_message(cid, "yes"))
        while not marker.exists():
            await asyncio.sleep(0.05)
        await asyncio.to_thread(backend.drop_store, "main")  # unreadable from now on
        try:
            result = await asyncio.wait_for(yes, 60)
        except ConversationError as err:
            desc = await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).describe()
            pytest.fail(f"the conversation ended as {desc.status.name} after an applied cancel: "
                        f"send_message raised {err.kind}: {err}")
        assert result.status in ("active", "escalated")


async def test_escalation_survives_a_database_that_refuses_writes(temporal_env, settings):
    """docs/concepts.md (Unknown outcomes): 'If a write's outcome cannot be shown after its retries, the conversation
    stops and escalates to a human (a ticket)'. The ticket lives in the same database as the
    write; when that database refuses writes (the very reason the write failed), open_ticket
    exhausts its retries, the ActivityError escapes SupportWorkflow.run and the conversation
    FAILS instead of being ESCALATED."""
    settings = settings.model_copy(update={"write_timeout_seconds": 2.0})
    brain = ListBrain([
        call("find_user_id_by_email", email=EMAIL),
        call("get_user_details", user_id=CUSTOMER),
        call("get_order_details", order_id=PENDING),
        call("modify_pending_order_address", order_id=PENDING, address1="1 Main St", address2="",
             city="Austin", state="TX", country="USA", zip="78701"),
    ])
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = await client.start_conversation(f"escalate-db-{uuid.uuid4().hex[:6]}")
        r = await client.send_message(cid, f"my email is {EMAIL}, change the address of {PENDING}")
        assert r.awaiting_confirmation
        # the database starts refusing inserts (a stand-in for a full disk / failing primary)
        with backend.engine.begin() as conn:
            for table in ("ledger", "tickets"):
                conn.exec_driver_sql(f"CREATE TRIGGER breaker_{table} BEFORE INSERT ON {table} "
                                     "BEGIN SELECT RAISE(ABORT, 'database refuses writes'); END")
        try:
            result = await asyncio.wait_for(client.send_message(cid, "yes"), 240)
        except ConversationError as err:
            desc = await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).describe()
            pytest.fail(f"the conversation ended as {desc.status.name}, not escalated: {err.kind}: {err}")
        assert result.status == "escalated"
