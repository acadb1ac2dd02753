"""A standalone refund whose approval expires while the ticketing system refuses every
request. ``RefundWorkflow``'s approval gate handles the failure of the expiry's human ticket:
the run does not fail (Temporal status ``failed``, ``GET /refunds/{id}`` saying ``failed`` with
no reason, nobody told that no human agent has the request). As a conversation says exactly
that (``no-handover-without-ticket``), a standalone refund ends ``refused`` with the reason
saying no ticket could be opened, and writes nothing."""

from __future__ import annotations

import uuid

from starter.client.conversations import StatekeeperClient
from tests.policy_fixtures import PENDING
from tests.service_fixtures import arm
from tests.workflow_harness import order_details, refund_settled, running_worker
from workflows.domain.policy.approvals import ApprovalPolicy
from workflows.refund.standalone import RefundRequest


async def test_an_expiry_whose_ticket_cannot_be_opened_is_refused_with_that_reason(temporal_env, settings,
                                                                                    tmp_path):
    import httpx

    from systems.fleet import Fleet, sqlite_databases

    fleet = Fleet(sqlite_databases(tmp_path))
    urls = fleet.start()
    try:
        arm(urls["ticketing"], "http_5xx", count=100)
        async with running_worker(temporal_env, settings, services=urls) as (_, backend):
            client = StatekeeperClient(temporal_env.client, settings.task_queue, settings.write_timeout_seconds,
                                       approvals=ApprovalPolicy(timeout_seconds=1.0))
            request = RefundRequest(request_id=f"exp-{uuid.uuid4().hex[:8]}", order_id=PENDING, operation="cancel",
                                    reason="no longer needed")  # 826.70: above the threshold
            refund_id = (await client.request_refund(request)).refund_id
            settled = await refund_settled(client, refund_id, seconds=90)
        tickets = httpx.get(f"{urls['ticketing']}/tickets/references").json()
    finally:
        fleet.stop()
    assert settled.status == "refused", settled
    assert settled.reason is not None and "expired" in settled.reason, settled
    assert "no human-agent ticket could be opened" in settled.reason, settled
    assert "handed to a human agent" not in settled.reason, settled
    assert tickets == []
    assert backend.ledger_entries("main") == [] and order_details(backend, PENDING)["status"] == "pending"
