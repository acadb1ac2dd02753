"""A standalone refund refused by the write itself says why. Two requests (other request
ids) cancel the same pending order and both wait for a supervisor; both are approved and
the second write finds the order cancelled. Its ``GET /refunds/{id}`` says ``refused`` with
the reason, never null: the ``RefundOutcome`` of a write the system refused carries the reason
in ``result``, which the status read takes as well as ``refused_reason`` (docs/api.md:
``refused``, ``reason`` says why)."""

from __future__ import annotations

import uuid

from tests.policy_fixtures import PENDING
from tests.workflow_harness import order_details, refund_settled, running_worker, until
from workflows.domain.policy.approvals import ApprovalPolicy
from workflows.refund.standalone import RefundRequest


async def test_a_write_refused_after_approval_reports_its_reason(temporal_env, settings):
    async with running_worker(temporal_env, settings, approvals=ApprovalPolicy()) as (client, backend):
        tag = uuid.uuid4().hex[:8]
        requests = [RefundRequest(request_id=f"why-{tag}-{n}", order_id=PENDING, operation="cancel",
                                  reason="no longer needed") for n in (1, 2)]
        refund_ids = [(await client.request_refund(request)).refund_id for request in requests]
        pending = {}

        async def both_pending() -> bool:
            for refund_id in refund_ids:
                pending[refund_id] = (await client.refund(refund_id)).pending_approval
            return all(pending.values())

        await until(both_pending, "both refunds awaiting approval")
        first, second = refund_ids
        await client.decide_approval(pending[first], "approve", "sup-1")
        applied = await refund_settled(client, first)
        assert applied.status == "applied", applied
        assert order_details(backend, PENDING)["status"] == "cancelled"

        await client.decide_approval(pending[second], "approve", "sup-2")
        refused = await refund_settled(client, second)
        assert (refused.status, refused.step) == ("refused", "failed"), refused
        assert refused.reason is not None and "only pending orders can be cancelled" in refused.reason, refused
        assert not refused.reason.startswith("Error"), refused.reason
        assert [row["ok"] for row in backend.ledger_entries("main")].count(True) == 1
