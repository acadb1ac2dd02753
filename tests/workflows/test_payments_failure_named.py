"""A payments failure after the retail write is named as the payments system's: the order's
write commits, then the payments service refuses every request (503). The standalone refund's
``reason`` (``GET /refunds/{id}``) and a conversation's escalation (its state's reason, its
ticket) say the order was changed but the payments system could not be reached, never that
the order system could not be reached (it answered; its write applied)."""

from __future__ import annotations

import uuid

import httpx

from tests.policy_fixtures import CUSTOMER, EMAIL, PENDING
from tests.service_fixtures import arm, services  # noqa: F401 - fixture
from tests.workflow_harness import ListBrain, call, refund_settled, running_worker
from workflows.domain import keys
from workflows.refund.standalone import RefundRequest

NAMED = "the order was changed, but the payments system could not be reached"
MISNAMED = "the order system could not"


async def test_a_standalone_refund_names_the_payments_system(temporal_env, settings, services):  # noqa: F811
    arm(services["payments"], "http_5xx", count=100)
    async with running_worker(temporal_env, settings, services=services) as (client, backend):
        request = RefundRequest(request_id=f"paynamed-{uuid.uuid4().hex[:6]}", order_id=PENDING,
                                operation="cancel", reason="no longer needed")
        started = await client.request_refund(request)
        status = await refund_settled(client, started.refund_id)
        assert status.status == "escalated", status
        assert NAMED in status.reason and MISNAMED not in status.reason, status.reason
        assert [e["ok"] for e in backend.ledger_entries("main")] == [True]  # the order's write applied
        key = f"cancel_pending_order:{PENDING}:{keys.standalone_operation_id(request.request_id)}"
        [ticket] = httpx.get(f"{services['ticketing']}/tickets", params={"reference": f"escalate:{key}"}).json()
        assert NAMED in ticket["summary"], ticket
        backend.engine.dispose()


async def test_a_conversation_names_the_payments_system(temporal_env, settings, services):  # noqa: F811
    arm(services["payments"], "http_5xx", count=100)
    brain = ListBrain([call("find_user_id_by_email", email=EMAIL), call("get_user_details", user_id=CUSTOMER),
                       call("get_order_details", order_id=PENDING),
                       call("cancel_pending_order", order_id=PENDING, reason="no longer needed")])
    async with running_worker(temporal_env, settings, brain=brain, services=services) as (client, backend):
        cid = await client.start_conversation(f"paynamed-{uuid.uuid4().hex[:6]}")
        assert (await client.send_message(cid, f"my email is {EMAIL}, cancel {PENDING}")).awaiting_confirmation
        answer = await client.send_message(cid, "yes")
        assert answer.status == "escalated", answer
        state = await client.state(cid)
        assert NAMED in state.ended_reason and MISNAMED not in state.ended_reason, state.ended_reason
        assert [e["ok"] for e in backend.ledger_entries("main")] == [True]
        backend.engine.dispose()
