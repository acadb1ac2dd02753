"""A standalone refund requested for a store the system of record does not have is refused
with that reason, and says so in its ``ProcessStatus``: ``UnknownStore`` from the fresh read does not
fail its run (``GET /refunds/{id}`` would answer ``failed`` with no reason, and
``GET /refunds?status=running`` list it as running for ever)."""

from __future__ import annotations

import uuid

import pytest

from tests.policy_fixtures import PENDING
from tests.workflow_harness import refund_settled, running_worker
from workflows.options import STATUS, STEP
from workflows.refund.standalone import RefundRequest

DELIVERED = "#W7736708"  # raj_sanchez_2970's delivered order


@pytest.mark.parametrize("operation, order, arguments", [
    ("cancel", PENDING, {"reason": "no longer needed"}),
    ("return", DELIVERED, {"item_ids": ["8323284863"], "payment_method_id": "credit_card_3362387"}),
])
async def test_a_refund_on_an_unknown_store_is_refused_with_its_reason(temporal_env, settings, operation, order,
                                                                       arguments):
    async with running_worker(temporal_env, settings) as (client, _backend):
        request = RefundRequest(request_id=f"nostore-{uuid.uuid4().hex[:6]}", order_id=order, operation=operation,
                                store="no-such-store", **arguments)
        started = await client.request_refund(request)
        status = await refund_settled(client, started.refund_id)
        assert (status.status, status.step) == ("refused", "refused"), status
        assert status.reason == "unknown store no-such-store: the system of record has no such store"
        described = await temporal_env.client.get_workflow_handle(started.refund_id).describe()
        attributes = described.typed_search_attributes
        assert (attributes.get(STATUS), attributes.get(STEP)) == ("refused", "refused")
        # the same request again answers the same refusal, nothing new runs
        assert (await client.request_refund(request)).status == "refused"
