"""The ticket look-up before a write is parked for a supervisor fails closed during a ticketing
outage: the ticketing service cannot be reached, so whether a human agent already has the order
is not known. The write is neither parked for a supervisor nor run: a conversation tells the
user plainly that it could not be checked (no human is promised: no ticket can be opened
either), a standalone refund ends ``refused`` saying so; no approval is pending and the ledger
holds nothing."""

from __future__ import annotations

import uuid

from tests.policy_fixtures import CUSTOMER, EMAIL, PENDING
from tests.workflow_harness import ListBrain, call, refund_settled, running_worker
from workflows.conversation.approvals import UNCHECKED
from workflows.domain import replies
from workflows.domain.policy.approvals import ApprovalPolicy
from workflows.refund.approval_gate import UNCHECKED_REASON
from workflows.refund.standalone import RefundRequest

TICKETING_DOWN = {"ticketing": "http://127.0.0.1:9"}  # nothing listens: every look-up fails


async def test_a_conversation_neither_parks_nor_runs_the_write(temporal_env, settings):
    brain = ListBrain([call("find_user_id_by_email", email=EMAIL), call("get_user_details", user_id=CUSTOMER),
                       call("get_order_details", order_id=PENDING),
                       call("cancel_pending_order", order_id=PENDING, reason="no longer needed")])
    async with running_worker(temporal_env, settings, brain=brain, approvals=ApprovalPolicy(),
                              services=TICKETING_DOWN) as (client, backend):
        cid = await client.start_conversation(f"ticket-down-{uuid.uuid4().hex[:6]}")
        shown = await client.send_message(cid, f"my email is {EMAIL}, cancel {PENDING}")
        assert shown.awaiting_confirmation
        answer = await client.send_message(cid, "yes")
        assert answer.text == replies.hand_off_unchecked(shown.awaiting_confirmation), answer.text
        assert answer.awaiting_approval is None and answer.status == "active", answer
        state = await client.state(cid)
        assert state.awaiting_approval == [] and state.pending_confirmation is None
        step = next(s for s in state.steps if s.name == "cancel_pending_order")
        assert step.status.value == "failed" and step.error == UNCHECKED, step
        assert backend.ledger_entries("main") == []


async def test_a_standalone_refund_is_refused_not_parked(temporal_env, settings):
    async with running_worker(temporal_env, settings, approvals=ApprovalPolicy(),
                              services=TICKETING_DOWN) as (client, backend):
        request = RefundRequest(request_id=f"ticket-down-{uuid.uuid4().hex[:6]}", order_id=PENDING,
                                operation="cancel", reason="no longer needed")
        started = await client.request_refund(request)
        status = await refund_settled(client, started.refund_id)
        assert (status.status, status.reason, status.pending_approval) == ("refused", UNCHECKED_REASON, None), status
        approvals = await temporal_env.client.get_workflow_handle(started.refund_id).query("approvals")
        assert approvals == []
        assert backend.ledger_entries("main") == []
