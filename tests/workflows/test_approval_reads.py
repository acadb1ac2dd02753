"""The Python client reads approvals as a supervisor does: ``StatekeeperClient.approval(id)`` and
the items of ``list_pending_approvals`` carry the write (its detail worded from the refund's fresh
reads, the payment method shown as the customer sees it, never its id), the amount, the reason
in plain words (no rule tags, no clause ids) and the times; ``refund(id)`` carries the amount;
an id no process issued is ``not_found``.

A standalone return of #W3113816's item 2206116040 (209.91) to the customer's gift card, which
did not pay for the order: above 100.00, so the refund-elsewhere rule asks a supervisor.
RefundWorkflow on a real Temporal dev server with a real worker and SQLite.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from starter.client.approvals import ApprovalItem
from starter.client.errors import ConversationError
from tests.workflow_harness import running_worker
from workflows.domain.policy.approvals import ApprovalPolicy, ApprovalStatus
from workflows.refund.standalone import RefundRequest

ORDER, ITEM, GIFT_CARD = "#W3113816", "2206116040", "gift_card_6023546"  # emma_santos_9753; the card holds 36


async def _pending(client, refund_id: str) -> str:
    for _ in range(150):
        status = await client.refund(refund_id)
        if status.pending_approval:
            return status.pending_approval
        await asyncio.sleep(0.2)
    raise AssertionError(f"refund {refund_id} never awaited approval: {status}")


async def _listed(client, approval_id: str) -> ApprovalItem:
    for _ in range(150):
        page = await client.list_pending_approvals(limit=100)
        found = next((i for i in page.items if getattr(i, "approval_id", None) == approval_id), None)
        if found is not None:
            return found
        await asyncio.sleep(0.2)
    raise AssertionError(f"approval {approval_id} never listed")


async def test_a_refund_approval_reads_its_detail_amount_and_reason_without_payment_method_ids(temporal_env, settings):
    async with running_worker(temporal_env, settings, approvals=ApprovalPolicy()) as (client, _backend):
        request = RefundRequest(request_id="read-1", order_id=ORDER, operation="return", item_ids=[ITEM],
                                payment_method_id=GIFT_CARD)
        refund_id = (await client.request_refund(request)).refund_id
        approval_id = await _pending(client, refund_id)
        assert (await client.refund(refund_id)).amount == Decimal("209.91")

        read = await client.approval(approval_id)
        assert (read.process, read.process_id, read.status) == ("refund", refund_id, ApprovalStatus.PENDING)
        operation = read.operation
        assert (operation.tool, operation.order_id, operation.amount) == (
            "return_delivered_order_items", ORDER, Decimal("209.91"))
        assert operation.detail.startswith(f"Return from order {ORDER}: ") and f"{ITEM} (209.91)" in operation.detail
        assert operation.detail.endswith("Refund 209.91 to gift card (balance 36.00).")
        assert GIFT_CARD not in read.model_dump_json()
        assert read.reason == ("209.91 is refunded to a payment method that did not pay for the order (a gift card, "
                               "credited at once), above 100.00.")
        assert read.requested_at < read.expires_at and read.decided_by is None and read.decided_at is None
        assert await _listed(client, approval_id) == read

        with pytest.raises(ConversationError) as unknown:
            await client.approval(f"{refund_id}~{'0' * 12}")
        assert unknown.value.kind == "not_found"

        await client.decide_approval(approval_id, "approve", "sup-cy")
        for _ in range(150):
            status = await client.refund(refund_id)
            if status.status not in ("running", "awaiting_approval"):
                break
            await asyncio.sleep(0.2)
        assert status.status == "applied" and status.amount == Decimal("209.91")
        decided = await client.approval(approval_id)
        assert decided.status is ApprovalStatus.APPROVED and decided.decided_by == "sup-cy" and decided.decided_at
        assert decided.operation == operation
