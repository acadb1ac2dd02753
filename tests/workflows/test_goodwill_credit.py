"""``grant_goodwill_credit`` end to end on a real Temporal dev server, a real worker and SQLite:
a conversation shows the exact credit, makes it only after the user's yes and refuses one over
the cap or a second one for the order (clause goodwill-credit); above the approval threshold a
supervisor approves or rejects it; a retried write credits the gift card once (the system of
record's balance, ledger and order, and the payments service); a backend requests it through
the standalone refund API; the Web UI's current details of the refund show it.

The model is the outside system faked at its boundary (a ``ListBrain`` proposes the credit).
"""

from __future__ import annotations

import asyncio
import uuid
from decimal import Decimal
from typing import AsyncIterator

import httpx
import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata

from starter.api.application import create_app
from tests.policy_fixtures import CARD, CUSTOMER, DELIVERED, DELIVERED_2, EMAIL, GIFT
from tests.port_faults import FaultyPort
from tests.service_fixtures import services  # noqa: F401 - fixture
from tests.workflow_harness import ListBrain, call, order_details, reply, running_worker, user_details
from tests.workflows.test_visibility import decoded, operator_view
from workflows.domain.replies import refund_refused
from workflows.domain import keys
from workflows.domain.actions import make_tool_call
from workflows.domain.contracts import RefundInput
from workflows.domain.policy.approvals import ApprovalPolicy, ApprovalStatus
from workflows.refund.workflow import RefundWorkflow

TOOL = "grant_goodwill_credit"
START_BALANCE = 30  # gift_card_2259499


def goodwill(amount: str, order_id: str = DELIVERED, reason: str = "late delivery") -> dict:
    """The model's proposal of a credit to the customer's gift card."""
    return call(TOOL, order_id=order_id, amount=amount, reason=reason, payment_method_id=GIFT)


def balance(backend) -> float:
    """The gift card's balance in the system of record."""
    return user_details(backend, CUSTOMER)["payment_methods"][GIFT]["balance"]


def credits(backend, order_id: str = DELIVERED) -> list[dict]:
    """The goodwill credits the order records."""
    history = order_details(backend, order_id)["payment_history"]
    return [entry for entry in history if entry["transaction_type"] == "goodwill_credit"]


async def current_details(handle) -> str:
    metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return metadata.current_details


async def test_a_conversation_credits_once_after_the_yes_and_refuses_over_the_cap_and_a_second(temporal_env,
                                                                                                 settings):
    """The model's credit over the cap is refused with the cap in the reason; the one within
    it is shown and nothing is written before the yes; after the yes the gift card is credited
    once and the workflow words the outcome; a second credit for the order is refused. The
    customer, profile and named order are read by the state before the model's first call."""
    brain = ListBrain([
        goodwill("98.09"),  # over 10 % of 980.87: refused, the model is told why
        goodwill("98.08"),
        goodwill("10.00", reason="damaged item"),  # a second credit for the same order
        reply("Sorry, an order can receive only one goodwill credit."),
    ])
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = await client.start_conversation(f"goodwill-{uuid.uuid4().hex[:6]}")
        handle = temporal_env.client.get_workflow_handle(f"support-{cid}")
        shown = await client.send_message(cid, f"Hi, my email is {EMAIL}; my order {DELIVERED} arrived two weeks late")
        detail = (f"Credit 98.08 to {GIFT} (gift card (balance 30.00)) as a goodwill gesture for order {DELIVERED} "
                  "(reason: late delivery). An order can receive only one goodwill credit.")
        assert shown.awaiting_confirmation == detail and detail in shown.text
        first = brain.views[0]  # the model's first call already sees the customer and the order
        assert first["customer"]["details_loaded"] and DELIVERED in first["orders"]
        state = await client.state(cid)
        [over] = state.rejections
        assert over.rule == "goodwill-credit" and "at most 98.08" in over.reason and "not 98.09" in over.reason
        # nothing is written before the yes
        assert balance(backend) == START_BALANCE and credits(backend) == [] and backend.ledger_entries("main") == []
        details = await current_details(handle)
        assert f"`{TOOL}` — order_id: {DELIVERED}, amount: 98.08, reason: late delivery" in details
        assert GIFT not in details

        asked = len(brain.views)
        done = await client.send_message(cid, "yes")
        assert done.text == (f"Your request is done: {detail} "
                             "Is there anything else I can help you with?")
        assert len(brain.views) == asked  # the outcome is the workflow's wording, not the model's
        assert balance(backend) == 128.08
        assert credits(backend) == [{"transaction_type": "goodwill_credit", "amount": 98.08, "payment_method_id": GIFT}]
        [entry] = backend.ledger_entries("main")
        assert entry["idempotency_key"] == f"{TOOL}:{DELIVERED}:{cid}.t1" and entry["ok"]  # proposed at turn 1
        state = await client.state(cid)
        [operation] = state.completed_operations
        assert operation.ok and operation.tool == TOOL
        # the gift card's new balance is in the state (the customer is read again after a refund-type write)
        assert state.customer.payment_methods[GIFT].balance == Decimal("128.08")

        # the refund's Web UI view: the operation, the amount, the outcome; no gift card id
        child = temporal_env.client.get_workflow_handle(operation.child_workflow_id)
        view = decoded(await operator_view(child))
        assert f"**Refund** on order `{DELIVERED}` — status **applied**" in view
        assert f"**Operation:** `{TOOL}` — order_id: {DELIVERED}, amount: 98.08, reason: late delivery" in view
        assert "**Amount:** 98.08" in view and "**Outcome:** applied" in view
        assert GIFT not in view and CUSTOMER not in view

        again = await client.send_message(cid, "The box was damaged too, can I get another credit?")
        assert again.awaiting_confirmation is None
        state = await client.state(cid)
        assert state.rejections[-1].rule == "goodwill-credit"
        assert state.rejections[-1].reason == (f"order {DELIVERED} already received a goodwill credit; an order gets "
                                               "at most one")
        assert balance(backend) == 128.08 and len(credits(backend)) == 1 and len(backend.ledger_entries("main")) == 1


async def start_refund(temporal_env, settings, call_args: dict, approvals: ApprovalPolicy):
    """Start a RefundWorkflow for a credit on store main (as a conversation's child); returns
    (handle, write key)."""
    credit = make_tool_call(TOOL, {"payment_method_id": GIFT, "reason": "damaged item", **call_args})
    operation = f"gw-{uuid.uuid4().hex[:8]}.t1"
    inp = RefundInput(store="main", operation_id=operation, call=credit, expected_user_id=CUSTOMER, approvals=approvals)
    handle = await temporal_env.client.start_workflow(
        RefundWorkflow.run, inp, id=keys.refund_workflow_id("main", credit.arguments.order_id, operation),
        task_queue=settings.task_queue)
    return handle, keys.idempotency_key(credit, operation)


async def pending_approval(handle):
    async def poll():
        while await handle.query(RefundWorkflow.step) != "awaiting_approval":
            await asyncio.sleep(0.1)
    await asyncio.wait_for(poll(), 20)
    [approval] = await handle.query(RefundWorkflow.approvals)
    return approval


LOW_THRESHOLD = ApprovalPolicy(threshold=Decimal("50.00"))


async def test_above_the_threshold_a_supervisor_approves_the_credit(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        handle, key = await start_refund(temporal_env, settings, {"order_id": DELIVERED, "amount": "60.00"},
                                         LOW_THRESHOLD)
        approval = await pending_approval(handle)
        assert approval.tool == TOOL and approval.amount == Decimal("60.00")
        assert approval.reasons == ["[approval-threshold] 60.00 is above the approval threshold of 50.00"]
        details = await current_details(handle)
        assert f"**Approval pending:** `{approval.approval_id}` — amount 60.00" in details
        assert "**Amount:** 60.00" in details and GIFT not in details
        assert balance(backend) == START_BALANCE and backend.ledger_entries("main") == []

        await client.decide_approval(approval.approval_id, "approve", "sup-ana")
        outcome = await asyncio.wait_for(handle.result(), 30)
        assert outcome.ok and outcome.approval.approver == "sup-ana"
        assert balance(backend) == 90 and len(credits(backend)) == 1
        assert [(e["idempotency_key"], e["ok"]) for e in backend.ledger_entries("main")] == [(key, True)]
        assert "**Approval approved** by `sup-ana`" in await current_details(handle)


async def test_above_the_threshold_a_rejected_credit_changes_nothing(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        handle, _ = await start_refund(temporal_env, settings, {"order_id": DELIVERED_2, "amount": "120.15"},
                                       LOW_THRESHOLD)
        approval = await pending_approval(handle)
        await client.decide_approval(approval.approval_id, "reject", "sup-bob", note="not this time")
        outcome = await asyncio.wait_for(handle.result(), 30)
        assert not outcome.ok and outcome.refused_reason == "rejected by sup-bob"
        assert outcome.approval.status is ApprovalStatus.REJECTED
        assert balance(backend) == START_BALANCE and credits(backend, DELIVERED_2) == []
        assert backend.ledger_entries("main") == []
        assert "**Outcome:** refused: rejected by sup-bob" in await current_details(handle)


async def test_a_retried_write_credits_the_gift_card_once(temporal_env, settings, services):  # noqa: F811
    faults = FaultyPort()
    faults.arm(TOOL, "commit_then_drop")  # the credit commits, then its answer is lost: the activity retries
    async with running_worker(temporal_env, settings, services=services,
                              wrap_port=faults.attach) as (client, backend):
        handle, key = await start_refund(temporal_env, settings, {"order_id": DELIVERED, "amount": "40.00"},
                                         ApprovalPolicy())
        outcome = await asyncio.wait_for(handle.result(), 60)
        assert faults.hits == [(TOOL, "commit_then_drop")]
        assert outcome.ok and outcome.replayed  # the retry got the ledger's recorded result
        assert balance(backend) == 70 and len(credits(backend)) == 1
        assert [(e["idempotency_key"], e["ok"]) for e in backend.ledger_entries("main")] == [(key, True)]
        assert backend.duplicate_writes("main") == 0
        # the payments service moved the credit once, as money to the customer's gift card
        [moved] = httpx.get(f"{services['payments']}/operations", params={"reference": DELIVERED}).json()
        assert moved["kind"] == TOOL and moved["idempotency_key"] == f"pay:{key}"
        assert moved["movements"] == [{"transaction_type": "refund", "amount": "40.00", "payment_method_id": GIFT}]


@pytest.fixture
async def api(temporal_env, settings) -> AsyncIterator[tuple[httpx.AsyncClient, object]]:
    """(http client of the API, retail backend) over a worker on the test's queue."""
    async with running_worker(temporal_env, settings) as (client, backend):
        app = create_app(lambda: client)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
                                     base_url="http://statekeeper.test", timeout=60.0) as http:
            yield http, backend


async def settled(http: httpx.AsyncClient, refund_id: str) -> dict:
    for _ in range(300):
        status = (await http.get(f"/refunds/{refund_id}")).json()
        if status["status"] not in ("running", "awaiting_approval"):
            return status
        await asyncio.sleep(0.1)
    raise AssertionError(f"refund {refund_id} still running")


async def test_a_backend_requests_a_credit_through_the_standalone_refund_api(api, temporal_env):
    http, backend = api
    body = {"request_id": "gw-1", "order_id": DELIVERED, "operation": "goodwill_credit", "amount": "25.00",
            "reason": "damaged item", "payment_method_id": GIFT}
    first = await http.post("/refunds", json=body)
    assert first.status_code == 202, first.text
    refund_id = first.json()["refund_id"]
    status = await settled(http, refund_id)
    assert (status["status"], status["operation"], status["order_id"]) == ("applied", "goodwill_credit", DELIVERED)
    assert balance(backend) == 55 and len(credits(backend)) == 1
    assert [e["idempotency_key"] for e in backend.ledger_entries("main")] == [f"{TOOL}:{DELIVERED}:gw-1.req"]
    details = await current_details(temporal_env.client.get_workflow_handle(refund_id))
    assert f"**Operation:** `{TOOL}` — order_id: {DELIVERED}, amount: 25.00, reason: damaged item" in details
    assert "**Amount:** 25.00" in details and GIFT not in details

    # the same request again is the same refund; nothing is credited twice
    again = await http.post("/refunds", json=body)
    assert again.status_code == 202 and again.json()["refund_id"] == refund_id
    assert balance(backend) == 55 and len(backend.ledger_entries("main")) == 1

    # a second request for the order, one over the cap and one to a card are refused with the
    # clause's sentence for callers (never the clause id or the text written for the model)
    clause = refund_refused("x (goodwill-credit)")
    second = await http.post("/refunds", json={**body, "request_id": "gw-2", "amount": "5.00"})
    refused = await settled(http, second.json()["refund_id"])
    assert refused["status"] == "refused" and refused["reason"] == clause
    over = await http.post("/refunds", json={**body, "request_id": "gw-3", "order_id": DELIVERED_2, "amount": "120.16"})
    refused = await settled(http, over.json()["refund_id"])
    assert refused["status"] == "refused" and refused["reason"] == clause
    card = await http.post("/refunds", json={**body, "request_id": "gw-4", "order_id": DELIVERED_2,
                                             "payment_method_id": CARD})
    refused = await settled(http, card.json()["refund_id"])
    assert refused["status"] == "refused" and "gift cards" in refused["reason"]
    assert balance(backend) == 55 and credits(backend, DELIVERED_2) == []

    # the tool's arguments are the request's fields: a missing one, or a bad amount, is a 422
    without_amount = {**{k: v for k, v in body.items() if k != "amount"}, "request_id": "gw-5"}
    missing = await http.post("/refunds", json=without_amount)
    assert missing.status_code == 422 and "amount" in missing.text
    bad = await http.post("/refunds", json={**body, "request_id": "gw-6", "amount": "1.234"})
    assert bad.status_code == 422
    assert len(backend.ledger_entries("main")) == 1  # the policy refused the others before the store
