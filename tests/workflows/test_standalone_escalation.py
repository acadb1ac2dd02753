"""A standalone refund (``POST /refunds``, ``RefundWorkflow`` without a conversation) whose
payment outcome cannot be shown escalates like a conversation: the ledger
is asked once more, a ticket keyed by the write is opened, and the refund's status is
``escalated`` with the reason stated; the payment is never sent again. Real parts: a
Temporal dev server, a worker, the retail store and the external services over HTTP.
"""

from __future__ import annotations

import asyncio
import uuid

import httpx
import sqlalchemy as sa

from systems.fleet import Fleet, sqlite_databases
from tests.policy_fixtures import PENDING
from tests.service_fixtures import arm
from tests.workflow_harness import refund_settled, running_worker
from workflows.domain import keys
from workflows.refund.standalone import RefundRequest


async def test_a_standalone_refund_whose_payment_cannot_be_told_is_escalated(temporal_env, settings, tmp_path):
    fleet = Fleet(sqlite_databases(tmp_path))
    urls = fleet.start()
    try:
        arm(urls["payments"], "answer_after_timeout", seconds=30.0)
        fast = settings.model_copy(update={"write_timeout_seconds": 3.0})
        async with running_worker(temporal_env, fast, services=urls) as (client, backend):
            request = RefundRequest(request_id=f"esc-{uuid.uuid4().hex[:6]}", order_id=PENDING, operation="cancel",
                                    reason="no longer needed")
            started = await client.request_refund(request)
            while httpx.get(f"{urls['payments']}/_faults").json().get("answer_after_timeout") != 1:
                await asyncio.sleep(0.05)
            await asyncio.to_thread(fleet.threads["payments"].stop)  # gone before it answers
            status = await refund_settled(client, started.refund_id)
            assert status.status == "escalated", status
            assert "could not be shown to have completed" in status.reason and "escalated" in status.reason
            assert "Error" not in status.reason and "OutcomeUnknown" not in status.reason
            assert "cancel_pending_order" not in status.reason and "the cancellation of order" in status.reason
            key = f"cancel_pending_order:{PENDING}:{keys.standalone_operation_id(request.request_id)}"
            tickets = httpx.get(f"{urls['ticketing']}/tickets", params={"reference": f"escalate:{key}"}).json()
            assert len(tickets) == 1
            assert status.step == "escalated"
            assert (await client.refund(started.refund_id)).status == "escalated"  # stable on a second read
            backend.engine.dispose()
    finally:
        fleet.stop()
    payments = sa.create_engine(sqlite_databases(tmp_path)["payments"])
    with payments.connect() as conn:  # sent once, never replayed
        assert conn.execute(sa.text("SELECT count(*) FROM payment_operations")).scalar_one() == 1
    payments.dispose()


async def test_the_same_request_in_two_stores_moves_each_stores_money(temporal_env, settings, tmp_path):
    """Two stores (two tenants' systems) number their orders alike. The same request id on the
    same order id in a second store has a payments key of its own: with the first's, both
    refunds would say ``applied`` while the payments service held one operation, and the second
    store's customer's money would never move (answered as a replay of the first)."""
    small = "#W5356919"  # pending, 45.90: no approval
    fleet = Fleet(sqlite_databases(tmp_path))
    urls = fleet.start()
    try:
        async with running_worker(temporal_env, settings, services=urls) as (client, backend):
            await asyncio.to_thread(backend.seed_store, "acme-eu")
            refunds = [await client.request_refund(RefundRequest(request_id="r-1", order_id=small, operation="cancel",
                                                                 reason="no longer needed", store=store))
                       for store in ("main", "acme-eu")]
            settled = [await refund_settled(client, r.refund_id) for r in refunds]
            assert [(s.status, s.replayed) for s in settled] == [("applied", False), ("applied", False)]
            backend.engine.dispose()
    finally:
        fleet.stop()
    payments = sa.create_engine(sqlite_databases(tmp_path)["payments"])
    with payments.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM payment_operations")).scalar_one() == 2
    payments.dispose()
