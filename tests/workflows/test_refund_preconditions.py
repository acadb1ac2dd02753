"""Preconditions of writes that move money, in running conversations: a cancel after a
payment change, or racing one from another conversation, never refunds more than was
paid; a second item modification, or one paid with another customer's card, is refused.

SupportWorkflow and RefundWorkflow on a real Temporal dev server, a real worker and
SQLite; only the model is faked, at its boundary. The same preconditions on the pure
policy are tests/core/test_refund_preconditions.py.
"""

from __future__ import annotations

import asyncio
import threading
import uuid

from activities.llm.model_activity import ModelActivities, offline_client
from activities.retail_port import RetailPort
from activities.tools import ToolActivities
from starter.client.conversations import StatekeeperClient
from tests.policy_fixtures import EMAIL, PENDING
from tests.workflow_harness import (
    NO_APPROVALS,
    ListBrain,
    call,
    order_details,
    reply,
    running_worker,
    user_details,
)
from starter.runtime.worker import build_backend, build_worker

ETHAN, ETHAN_EMAIL, ETHAN_ORDER = "ethan_lopez_6291", "ethan.lopez8943@example.com", "#W6779827"
ETHAN_GIFT, ETHAN_CARD = "gift_card_7219486", "credit_card_9789590"  # the order was paid with the gift card


async def test_cancel_after_payment_change_refunds_at_most_the_order_total(temporal_env, settings):
    """A pending order whose payment was moved to another card (payment + refund in its
    history) and is then cancelled: the cancel is refused by the policy, or refunds no more
    than the one purchase. The customer, profile and named order are read by the state
    (state-driven reads), so the model's first proposal is the payment change; its outcome
    is worded by the workflow, so the model's next call is in the cancel's turn."""
    brain = ListBrain([
        call("modify_pending_order_payment", order_id=ETHAN_ORDER, payment_method_id=ETHAN_CARD),
        call("cancel_pending_order", order_id=ETHAN_ORDER, reason="no longer needed"),
        reply("Cancelled."),
    ])
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        before = user_details(backend, ETHAN)["payment_methods"][ETHAN_GIFT]["balance"]
        paid = order_details(backend, ETHAN_ORDER)["payment_history"][0]["amount"]
        cid = await client.start_conversation(f"pay-then-cancel-{uuid.uuid4().hex[:6]}")
        r = await client.send_message(cid, f"my email is {ETHAN_EMAIL}, pay {ETHAN_ORDER} with {ETHAN_CARD}")
        assert r.awaiting_confirmation
        r = await client.send_message(cid, "yes")
        assert r.text.startswith("Your request is done:"), r.text  # the payment change applied
        r = await client.send_message(cid, "actually cancel it, no longer needed")
        detail = r.awaiting_confirmation
        if detail is None:
            # refused by the policy: the order stays as it was and no money moves
            state = await client.state(cid)
            assert state.rejections[-1].rule == "cancel-pending-only", state.rejections[-1]
            assert "more than was paid" in state.rejections[-1].reason
            assert order_details(backend, ETHAN_ORDER)["status"] == "pending"
            assert user_details(backend, ETHAN)["payment_methods"][ETHAN_GIFT]["balance"] >= before
            return
        assert "Cancel order" in detail
        await client.send_message(cid, "yes")
        order = order_details(backend, ETHAN_ORDER)
        after = user_details(backend, ETHAN)["payment_methods"][ETHAN_GIFT]["balance"]
        refunded = sum(p["amount"] for p in order["payment_history"] if p["transaction_type"] == "refund")
        charged = sum(p["amount"] for p in order["payment_history"] if p["transaction_type"] == "payment")
        assert refunded <= charged - paid + 0.01 or refunded <= paid + 0.01, (
            f"one purchase of {paid}: charged {charged}, refunded {refunded}; gift card {before} -> {after}; "
            f"the user confirmed: {detail!r}")


async def test_cancel_racing_a_payment_change_never_refunds_more_than_was_paid(temporal_env, settings):
    """Two conversations of the same customer (two tabs, or chat + a backend service) on one
    pending order: A confirms a cancel, B confirms a payment change. A's RefundWorkflow does
    its fresh read (1 payment: ok) and then the write activity runs later, in another
    transaction. If B's change commits in between, the cancel must still not refund every
    payment_history entry (3 x the amount for one payment). The only test-side change is
    latency: A's cancel write is held until B's change has committed (as a slow worker or DB would)."""
    backend = build_backend(settings)
    port = RetailPort(backend)
    entered, release = threading.Event(), threading.Event()

    class HoldCancelWrites:
        """A tool port (test wrapper) that holds the cancel write until released."""

        def invoke(self, store, tool, arguments, **kwargs):
            if tool == "cancel_pending_order" and kwargs.get("idempotency_key"):
                entered.set()
                release.wait(60)
            return port.invoke(store, tool, arguments, **kwargs)

        def recorded(self, *args):
            return port.recorded(*args)

        def has_store(self, store):
            return port.has_store(store)

    tools = ToolActivities(tools=HoldCancelWrites(), outbox=port, tickets=port)

    def brain(view: dict, plan: dict | None = None) -> dict:
        done = [op for op in view["completed_operations"]]
        if view["customer"] is None:
            return call("find_user_id_by_email", email=ETHAN_EMAIL)
        if not view["customer"]["details_loaded"]:
            return call("get_user_details", user_id=ETHAN)
        if ETHAN_ORDER not in view["orders"]:
            return call("get_order_details", order_id=ETHAN_ORDER)
        if done or view["rejections"]:
            return reply("Done.")
        if view["conversation_id"].startswith("cancel"):
            return call("cancel_pending_order", order_id=ETHAN_ORDER, reason="no longer needed")
        return call("modify_pending_order_payment", order_id=ETHAN_ORDER, payment_method_id=ETHAN_CARD)

    model = ModelActivities(offline_client(30.0, brain=brain), model="test-brain")
    paid = order_details(backend, ETHAN_ORDER)["payment_history"][0]["amount"]
    gift_before = user_details(backend, ETHAN)["payment_methods"][ETHAN_GIFT]["balance"]
    async with build_worker(temporal_env.client, settings, backend, model=model, tools=tools):
        client = StatekeeperClient(temporal_env.client, settings.task_queue, approvals=NO_APPROVALS)
        a = await client.start_conversation(f"cancel-{uuid.uuid4().hex[:6]}")
        b = await client.start_conversation(f"pay-{uuid.uuid4().hex[:6]}")
        ra = await client.send_message(a, f"my email is {ETHAN_EMAIL}, cancel {ETHAN_ORDER}, no longer needed")
        rb = await client.send_message(b, f"my email is {ETHAN_EMAIL}, pay {ETHAN_ORDER} with {ETHAN_CARD}")
        assert ra.awaiting_confirmation and "Cancel order" in ra.awaiting_confirmation
        assert rb.awaiting_confirmation and "Pay order" in rb.awaiting_confirmation
        yes_a = asyncio.create_task(client.send_message(a, "yes"))
        assert await asyncio.to_thread(entered.wait, 30)  # A's fresh read passed; its write is in flight
        await client.send_message(b, "yes")          # B's payment change commits
        release.set()
        await asyncio.wait_for(yes_a, 30)
    order = order_details(backend, ETHAN_ORDER)
    refunded = sum(p["amount"] for p in order["payment_history"] if p["transaction_type"] == "refund")
    charged = sum(p["amount"] for p in order["payment_history"] if p["transaction_type"] == "payment")
    gift_after = user_details(backend, ETHAN)["payment_methods"][ETHAN_GIFT]["balance"]
    assert refunded <= charged + 0.01, (
        f"status {order['status']}: paid {paid} once, charged {charged}, refunded {refunded}; "
        f"gift card {gift_before} -> {gift_after}; history {order['payment_history']}")


async def test_second_item_modification_and_other_customers_payment_refused(temporal_env, settings):
    """An item change paid with another customer's card is refused (one-customer); the one
    paid with the customer's own card runs after the yes (its outcome worded by the
    workflow); a second item change of the same order is then refused (item-change-once),
    and the ledger holds the one write."""
    from tests.policy_fixtures import other_variant
    old, new = other_variant(PENDING)
    old2, new2 = other_variant(PENDING, index=1)
    from tests.policy_fixtures import data
    product = data()["orders"][PENDING]["items"]
    brain = ListBrain([
        # the customer, their profile and the named order are read by the state (state-driven reads)
        *[call("get_product_details", product_id=i["product_id"]) for i in product],
        # another customer's payment method
        call("modify_pending_order_items", order_id=PENDING, item_ids=[old], new_item_ids=[new],
             payment_method_id="credit_card_9789590"),
        call("modify_pending_order_items", order_id=PENDING, item_ids=[old], new_item_ids=[new],
             payment_method_id="credit_card_3362387"),
        call("modify_pending_order_items", order_id=PENDING, item_ids=[old2], new_item_ids=[new2],
             payment_method_id="credit_card_3362387"),
        reply("refused"),
    ])
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = await client.start_conversation(f"modify-twice-{uuid.uuid4().hex[:6]}")
        r = await client.send_message(cid, f"my email is {EMAIL}, change an item of {PENDING}")
        assert r.awaiting_confirmation and "credit_card_3362387" in r.awaiting_confirmation
        await client.send_message(cid, "yes")
        r = await client.send_message(cid, "and another item please")
        assert r.awaiting_confirmation is None
        state = await client.state(cid)
        rules = [x.rule for x in state.rejections]
        assert "one-customer" in rules and "item-change-once" in rules
        assert len(backend.ledger_entries("main")) == 1
