"""RefundWorkflow's supervisor approvals on a real Temporal dev server, a real worker and
SQLite: a refund above the threshold waits (step, ``approvals`` query, ``PendingApproval``)
and runs once when approved; a rejection or an expiry writes nothing (the expiry opens a
ticket); a decision for another operation, a second decision, a malformed or unknown id
are refused with the process left as it was. Decisions go through ``StatekeeperClient``.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from starter.client.conversations import ConversationError
from tests.policy_fixtures import CARD, CUSTOMER, DELIVERED, PENDING
from tests.workflow_harness import order_details, running_worker
from workflows.domain import keys
from workflows.domain.actions import call_digest, make_tool_call
from workflows.domain.policy.approvals import ApprovalPolicy, ApprovalStatus, approval_id_for
from workflows.domain.contracts import RefundInput, RefundOutcome
from workflows.options import PENDING_APPROVAL
from workflows.refund.workflow import RefundWorkflow

CANCEL = make_tool_call("cancel_pending_order", {"order_id": PENDING, "reason": "no longer needed"})  # 826.70


async def start(client, settings, call, *, timeout: float = 600.0, approved_by=None):
    """Start a RefundWorkflow for ``call`` on store main; returns (handle, operation id, write key)."""
    operation = f"appr-{uuid.uuid4().hex[:8]}.t1"
    inp = RefundInput(store="main", operation_id=operation, call=call, expected_user_id=CUSTOMER,
                      approvals=ApprovalPolicy(timeout_seconds=timeout), approved_by=approved_by)
    handle = await client.start_workflow(
        RefundWorkflow.run, inp, id=keys.refund_workflow_id("main", call.arguments.order_id, operation),
        task_queue=settings.task_queue)
    return handle, operation, keys.idempotency_key(call, operation)


async def pending_approval(handle, deadline: float = 20.0):
    """Wait until the refund waits for a supervisor; returns its one approval."""
    async def poll():
        while await handle.query(RefundWorkflow.step) != "awaiting_approval":
            await asyncio.sleep(0.1)
    await asyncio.wait_for(poll(), deadline)
    [approval] = await handle.query(RefundWorkflow.approvals)
    return approval


async def pending_attribute(handle):
    return (await handle.describe()).typed_search_attributes.get(PENDING_APPROVAL)


async def test_over_threshold_waits_then_runs_once_when_approved(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        handle, operation, key = await start(temporal_env.client, settings, CANCEL)
        approval = await pending_approval(handle)
        assert approval.status is ApprovalStatus.PENDING and str(approval.amount) == "826.70"
        assert approval.approval_id == approval_id_for(handle.id, operation, call_digest(CANCEL))
        assert approval.reasons == ["[approval-threshold] 826.70 is above the approval threshold of 500.00"]
        assert await pending_attribute(handle) == approval.approval_id
        assert order_details(backend, PENDING)["status"] == "pending" and backend.ledger_entries("main") == []

        # an approval id bound to other arguments (another reason) is refused; nothing changes
        other = approval_id_for(handle.id, operation, call_digest(
            make_tool_call("cancel_pending_order", {"order_id": PENDING, "reason": "ordered by mistake"})))
        with pytest.raises(ConversationError) as err:
            await client.decide_approval(other, "approve", "alice")
        assert err.value.kind == "not_found" and "bound to one exact operation" in str(err.value)  # never issued
        assert (await handle.query(RefundWorkflow.approvals))[0].status is ApprovalStatus.PENDING
        assert backend.ledger_entries("main") == []

        decided = await client.decide_approval(approval.approval_id, "approve", "alice", note="ok by policy 7")
        assert (decided.status, decided.approver, decided.note) == (ApprovalStatus.APPROVED, "alice", "ok by policy 7")
        outcome = await handle.result()
        assert isinstance(outcome, RefundOutcome) and outcome.ok
        assert outcome.approval.approver == "alice" and outcome.approval.decided_at is not None
        assert order_details(backend, PENDING)["status"] == "cancelled"
        ledger = backend.ledger_entries("main")
        assert [(row["idempotency_key"], row["ok"]) for row in ledger] == [(key, True)]
        assert backend.duplicate_writes("main") == 0
        assert await pending_attribute(handle) is None

        # a second decision, after the process finished, is refused and writes nothing
        with pytest.raises(ConversationError) as err:
            await client.decide_approval(approval.approval_id, "reject", "bob")
        assert err.value.kind == "approval_refused"
        assert len(backend.ledger_entries("main")) == 1


async def test_second_decision_on_a_live_refund_names_the_first(temporal_env, settings):
    """Two decisions sent together: the first is applied, the second refused by name."""
    async with running_worker(temporal_env, settings) as (client, backend):
        handle, _, _ = await start(temporal_env.client, settings, CANCEL)
        approval = await pending_approval(handle)
        results = await asyncio.gather(client.decide_approval(approval.approval_id, "reject", "carol"),
                                       client.decide_approval(approval.approval_id, "approve", "dave"),
                                       return_exceptions=True)
        decided = [r for r in results if not isinstance(r, Exception)]
        errors = [r for r in results if isinstance(r, ConversationError)]
        assert len(decided) == 1 and len(errors) == 1, results
        assert errors[0].kind == "approval_refused"
        # refused by name, or (when it reached the server as the refund closed) as too late
        assert (f"already {decided[0].status.value} by {decided[0].approver}" in str(errors[0])
                or "its process has finished" in str(errors[0])), errors[0]
        outcome = await handle.result()
        assert outcome.ok is (decided[0].status is ApprovalStatus.APPROVED)


async def test_rejected_refund_writes_nothing_and_records_the_reason(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        handle, _, _ = await start(temporal_env.client, settings, CANCEL)
        approval = await pending_approval(handle)
        await client.decide_approval(approval.approval_id, "reject", "bob", note="customer under review")
        outcome = await handle.result()
        assert not outcome.ok and outcome.refused_reason == "rejected by bob"
        assert outcome.approval.status is ApprovalStatus.REJECTED and outcome.approval.note == "customer under review"
        [recorded] = await handle.query(RefundWorkflow.approvals)
        assert recorded.approver == "bob" and recorded.decided_at is not None
        assert await handle.query(RefundWorkflow.step) == "refused"
        assert order_details(backend, PENDING)["status"] == "pending"
        assert backend.ledger_entries("main") == [] and backend.tickets("main") == []
        assert await pending_attribute(handle) is None


async def test_expired_approval_opens_a_ticket_and_writes_nothing(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        handle, _, key = await start(temporal_env.client, settings, CANCEL, timeout=2.0)
        approval = await pending_approval(handle)
        outcome = await asyncio.wait_for(handle.result(), 30)
        assert not outcome.ok and outcome.refused_reason.startswith("approval expired undecided after 2 s")
        assert outcome.approval.status is ApprovalStatus.EXPIRED
        [ticket] = backend.tickets("main")
        assert ticket["ticket_key"] == keys.approval_expiry_ticket_key(key) == f"approval-expired:{key}"
        assert "826.70" in ticket["summary"] and "@" not in ticket["summary"]
        assert order_details(backend, PENDING)["status"] == "pending" and backend.ledger_entries("main") == []
        assert await pending_attribute(handle) is None
        with pytest.raises(ConversationError) as err:
            await client.decide_approval(approval.approval_id, "approve", "alice")
        assert err.value.kind == "approval_refused"
        assert backend.ledger_entries("main") == []


async def test_small_refunds_and_granted_approvals_do_not_wait(temporal_env, settings):
    small = make_tool_call("return_delivered_order_items",
                           {"order_id": DELIVERED, "item_ids": ["6574183535"], "payment_method_id": CARD})  # 28.14
    async with running_worker(temporal_env, settings) as (client, backend):
        handle, _, _ = await start(temporal_env.client, settings, small)
        outcome = await asyncio.wait_for(handle.result(), 30)
        assert outcome.ok and outcome.approval is None and await handle.query(RefundWorkflow.approvals) == []
        handle, _, _ = await start(temporal_env.client, settings, CANCEL, approved_by="conversation-supervisor")
        outcome = await asyncio.wait_for(handle.result(), 30)
        assert outcome.ok and outcome.approval is None
        assert order_details(backend, PENDING)["status"] == "cancelled"
        assert len(backend.ledger_entries("main")) == 2


async def test_malformed_and_unknown_ids_are_not_found(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        for approval_id in ("not-an-approval", "refund-main-W0-none.t1~0123456789ab"):
            with pytest.raises(ConversationError) as err:
                await client.decide_approval(approval_id, "approve", "alice")
            assert err.value.kind == "not_found", (approval_id, err.value)
        with pytest.raises(ConversationError) as err:
            await client.decide_approval("refund-main-W0-none.t1~0123456789ab", "approve", "alice smith")
        assert err.value.kind == "invalid" and "approver" in str(err.value)
