"""A standalone request sent again with other arguments after its first run is gone
(retention purge or erasure deleted it from Temporal; the ledger keeps the row, anonymised,
so that a repeat never pays twice). The API cannot see the earlier run, so it starts a new
one; its ledger look-up finds the key holding another call. ``IdempotencyKeyConflict`` does
not fail the run (``GET /refunds/{id}`` would say ``failed`` with no reason). docs/api.md: a
request id used with other arguments is refused; nothing is written, so the refund ends
``refused``, saying so."""

from __future__ import annotations

import uuid

from tests.policy_fixtures import PENDING
from tests.workflow_harness import order_details, refund_settled, running_worker
from workflows.refund.workflow import RefundWorkflow
from workflows.refund.standalone import RefundRequest


async def test_a_request_resent_with_other_arguments_after_its_run_is_gone_is_refused(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        request_id = f"gone-{uuid.uuid4().hex[:8]}"
        first = RefundRequest(request_id=request_id, order_id=PENDING, operation="cancel", reason="no longer needed")
        applied = await refund_settled(client, (await client.request_refund(first)).refund_id)
        assert applied.status == "applied", applied
        rows = backend.ledger_entries("main")

        # the same request id and order, another reason: what the API starts once the first run
        # no longer exists in Temporal (the memo that made it a 409 went with it)
        other = RefundRequest(request_id=request_id, order_id=PENDING, operation="cancel", reason="ordered by mistake")
        again = f"{other.refund_id()}-after-purge"
        await temporal_env.client.start_workflow(
            RefundWorkflow.run, other.refund_input(settings.write_timeout_seconds), id=again,
            task_queue=settings.task_queue)
        status = await refund_settled(client, again)
    assert status.status == "refused", status
    assert status.reason is not None and "other arguments" in status.reason, status
    assert "IdempotencyKeyConflict" not in status.reason and "Error" not in status.reason, status
    assert backend.ledger_entries("main") == rows and order_details(backend, PENDING)["status"] == "cancelled"
