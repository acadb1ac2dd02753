"""Approval decisions over HTTP on a real standalone refund above the threshold: the
refund waits with ``PendingApproval``; a decision for an approval id the process never
issued (another operation's) is a 404 and changes nothing; a second decision is a 409; the right id approved by a named approver runs the write once.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal

import httpx

from starter.api.application import create_app
from starter.client.conversations import StatekeeperClient
from tests.workflow_harness import order_details
from workflows.domain.policy import approvals

ORDER = "#W5918442"  # sofia_rossi_8776, pending, one payment, items worth 1463.70


async def _status(http: httpx.AsyncClient, refund_id: str, wanted: set[str]) -> dict:
    status: dict = {}
    for _ in range(100):
        status = (await http.get(f"/refunds/{refund_id}")).json()
        if status["status"] in wanted:
            break
        await asyncio.sleep(0.2)
    return status


async def test_an_approval_id_never_issued_is_404_and_the_right_one_runs_once(temporal_env, settings):
    from starter.runtime.worker import build_backend, build_worker

    backend = build_backend(settings)
    policy = approvals.ApprovalPolicy(threshold=Decimal("500.00"), timeout_seconds=600)
    client = StatekeeperClient(temporal_env.client, settings.task_queue, approvals=policy, pseudonym_key="k")
    async with build_worker(temporal_env.client, settings, backend):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(lambda: client)),
                                     base_url="http://statekeeper.test", timeout=60.0) as http:
            body = {"request_id": "big-1", "order_id": ORDER, "operation": "cancel", "reason": "no longer needed"}
            refund_id = (await http.post("/refunds", json=body)).json()["refund_id"]
            waiting = await _status(http, refund_id, {"awaiting_approval"})
            approval_id = waiting["pending_approval"]
            assert waiting["status"] == "awaiting_approval" and approval_id.startswith(refund_id + "~")

            other = f"{refund_id}~{'0' * 12}"  # the same process, another operation/digest
            response = await http.post(f"/approvals/{other}", json={"decision": "approve", "approver": "sup-1"})
            assert response.status_code == 404, response.text
            assert order_details(backend, ORDER)["status"] == "pending" and backend.ledger_entries("main") == []
            assert (await http.get(f"/refunds/{refund_id}")).json()["status"] == "awaiting_approval"

            response = await http.post(f"/approvals/{approval_id}", json={"decision": "approve", "approver": "sup-1"})
            assert response.status_code == 200, response.text
            assert response.json()["approver"] == "sup-1"
            again = await http.post(f"/approvals/{approval_id}", json={"decision": "reject", "approver": "sup-2"})
            assert again.status_code == 409  # a second decision
            assert (await _status(http, refund_id, {"applied", "refused"}))["status"] == "applied"
            assert len(backend.ledger_entries("main")) == 1
            assert order_details(backend, ORDER)["status"] == "cancelled"
