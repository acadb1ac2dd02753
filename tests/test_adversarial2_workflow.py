"""Second adversarial pass: SupportWorkflow / RefundWorkflow on the real Temporal dev
server, a real worker and SQLite. Only the model is faked, at its boundary (a brain
behind the Messages API wire format). A failing test is a defect; *_held_up tests
document what held.

These tests were written by an adversarial review against the code of that day; each
docstring describes the defect as it was found (file:line references are as of the
review). All are fixed now, and each test keeps guarding against its return.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid

import pytest

from activities.llm.model_activity import ModelActivities, offline_client
from activities.retail_port import RetailPort
from activities.tools import ToolActivities
from starter.client import ConversationError, StatekeeperClient
from tests.policy_fixtures import CUSTOMER, DELIVERED, EMAIL, PENDING
from tests.workflow_harness import running_worker
from worker import build_backend, build_worker
from workflows.support import support_workflow_id

FS = "\x1c"


def call(name: str, **arguments) -> dict:
    return {"kind": "tool_call", "tool": {"name": name, "arguments": arguments}}


def reply(text: str) -> dict:
    return {"kind": "reply", "text": text}


def _order(backend, order_id: str) -> dict:
    return json.loads(backend.read("main", "get_order_details", {"order_id": order_id}))


def _user(backend, user_id: str) -> dict:
    return json.loads(backend.read("main", "get_user_details", {"user_id": user_id}))


async def _died(env, cid: str, err: BaseException) -> str:
    desc = await env.client.get_workflow_handle(support_workflow_id(cid)).describe()
    return f"{type(err).__name__} {getattr(err, 'kind', '')} {str(err)[:300]}; workflow {desc.status.name}"


# -------------------------------------------------------------------------------------
# Bounded prompt: legal messages still grow the model input (and the state) without bound.
# -------------------------------------------------------------------------------------


async def test_legal_messages_with_padded_names_do_not_kill_the_conversation(temporal_env, settings):
    """Each message is legal (< 8 KB, accepted by the validator): "i am" + 8100 x '\\x1c'
    (whitespace to the regex) + a new name. workflows/facts.py:26,74 pins the whole span as
    the fact's verbatim, forever; MAX_PINNED_FACTS counts facts, not bytes. The snapshot
    (activity input) and the state (continue-as-new input) pass Temporal's 2 MB payload
    limit after ~30 messages and the conversation dies."""
    async with running_worker(temporal_env, settings) as (client, _):
        cid = await client.start_conversation(f"pad-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        for i in range(40):
            first = "A" + "".join("abcdefghijklmnop"[(i >> k) & 15] for k in range(0, 16, 4))
            text = "i am" + FS * 8100 + f" {first} Smith"
            assert len(text.encode()) <= 8192
            try:
                r = await asyncio.wait_for(client.send_message(cid, text), 60)
            except (ConversationError, asyncio.TimeoutError) as err:
                pytest.fail(f"legal message {i + 2}: {await _died(temporal_env, cid, err)}")
            assert r.status == "active"


async def test_model_repeating_refused_proposals_does_not_kill_the_conversation(temporal_env, settings):
    """A confused model alternates a `think` (accepted, resets the rejection streak) with a
    refused write: 15 rejections per user turn, each keeping its whole proposal
    (state.rejections is never trimmed, workflows/transitions.py:59). The prompt windows
    them (5), but the state is the continue-as-new input and grows ~70 KB per turn."""
    n = {"calls": 0}

    def brain(view: dict, plan: dict | None = None) -> dict:
        n["calls"] += 1
        if n["calls"] % 2:
            return call("think", thought="let me try the address again")
        return call("modify_user_address", user_id="someone_else_1234", address1=FS * 200, address2=FS * 200,
                    city=FS * 100, state=FS * 100, country=FS * 100, zip=FS * 20)

    async with running_worker(temporal_env, settings, brain=brain) as (client, _):
        cid = await client.start_conversation(f"rej-{uuid.uuid4().hex[:6]}")
        sizes = []
        for turn in range(8):
            try:
                r = await asyncio.wait_for(client.send_message(cid, f"please change my address ({turn})"), 60)
            except Exception as err:  # noqa: BLE001 - a stuck update surfaces as an SDK timeout, not ConversationError
                pytest.fail(f"turn {turn + 1}: {await _died(temporal_env, cid, err)}")
            assert r.status == "active"
            sizes.append(len((await client.state(cid)).model_dump_json()))
        # 15 rejections a turn fill the state's window after 4 turns; from then on it must not grow
        assert sizes[-1] - sizes[4] < 2_000, f"the state keeps growing: {sizes}"


# -------------------------------------------------------------------------------------
# Refund safety: the fresh read and the write are not one transaction.
# -------------------------------------------------------------------------------------

ETHAN, ETHAN_EMAIL, ETHAN_ORDER = "ethan_lopez_6291", "ethan.lopez8943@example.com", "#W6779827"
ETHAN_GIFT, ETHAN_CARD = "gift_card_7219486", "credit_card_9789590"  # the order was paid with the gift card


async def test_cancel_racing_a_payment_change_never_refunds_more_than_was_paid(temporal_env, settings):
    """Two conversations of the same customer (two tabs, or chat + a backend service) on one
    pending order: A confirms a cancel, B confirms a payment change. A's RefundWorkflow does
    its fresh read (1 payment: ok, workflows/refund.py:73) and then the write activity runs
    later, in another transaction (systems/retail/ledger.py _apply re-checks nothing of
    the policy). If B's change commits in between, the cancel refunds every payment_history
    entry: 3 x the amount for one payment. The only test-side change is latency: A's cancel
    write is held until B's change has committed (as a slow worker or DB would)."""
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
    paid = _order(backend, ETHAN_ORDER)["payment_history"][0]["amount"]
    gift_before = _user(backend, ETHAN)["payment_methods"][ETHAN_GIFT]["balance"]
    async with build_worker(temporal_env.client, settings, backend, model=model, tools=tools):
        client = StatekeeperClient(temporal_env.client, settings.task_queue)
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
    order = _order(backend, ETHAN_ORDER)
    refunded = sum(p["amount"] for p in order["payment_history"] if p["transaction_type"] == "refund")
    charged = sum(p["amount"] for p in order["payment_history"] if p["transaction_type"] == "payment")
    gift_after = _user(backend, ETHAN)["payment_methods"][ETHAN_GIFT]["balance"]
    assert refunded <= charged + 0.01, (
        f"status {order['status']}: paid {paid} once, charged {charged}, refunded {refunded}; "
        f"gift card {gift_before} -> {gift_after}; history {order['payment_history']}")


# -------------------------------------------------------------------------------------
# Confirmation: the binding is to the call's content, not to the proposal that was shown.
# -------------------------------------------------------------------------------------

NEW_ADDRESS = dict(address1="1 Elm St", address2="", city="Austin", state="TX", country="USA", zip="78701")


async def test_stale_duplicate_yes_does_not_confirm_a_later_proposal(temporal_env, settings):
    """The user double-submits "yes" to D1 (address change of PENDING) while the worker is
    down; both messages are accepted with seen_digest = digest(D1). The first runs D1. The
    model then proposes the identical change again (new operation id, new pending step).
    The second "yes" was sent before that proposal existed, yet it confirms it because the
    digest is of the call's content (workflows/support.py:197, policy.py:103): a second
    write the user never saw a prompt for."""
    state = {"reproposed": False}

    def brain(view: dict, plan: dict | None = None) -> dict:
        ops = [op for op in view["completed_operations"] if op["ok"]]
        if view["customer"] is None:
            return call("find_user_id_by_email", email=EMAIL)
        if not view["customer"]["details_loaded"]:
            return call("get_user_details", user_id=CUSTOMER)
        if PENDING not in view["orders"]:
            return call("get_order_details", order_id=PENDING)
        if not ops and view["pending_confirmation"] is None and "address" in view["recent_turns"][-1]["text"]:
            return call("modify_pending_order_address", order_id=PENDING, **NEW_ADDRESS)
        if len(ops) == 1 and not state["reproposed"]:
            state["reproposed"] = True  # a model that "double-checks" by proposing the same change
            return call("modify_pending_order_address", order_id=PENDING, **NEW_ADDRESS)
        return reply("Anything else?")

    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = await client.start_conversation(f"dup-yes-{uuid.uuid4().hex[:6]}")
        r = await client.send_message(cid, f"my email is {EMAIL}; change the address of {PENDING}")
        assert r.awaiting_confirmation and "Austin" in r.awaiting_confirmation
    # worker down (deploy, crash): the user's double-click sends "yes" twice
    yes1 = asyncio.create_task(client.send_message(cid, "yes"))
    yes2 = asyncio.create_task(client.send_message(cid, "yes"))
    await asyncio.sleep(1.0)
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        first, second = await asyncio.wait_for(asyncio.gather(yes1, yes2), 60)
        writes = [e for e in backend.ledger_entries("main") if e["tool"] == "modify_pending_order_address"]
        assert len(writes) == 1, (
            f"{len(writes)} address writes from one shown prompt; replies: {first.text!r} / {second.text!r}; "
            f"duplicate_writes={backend.duplicate_writes('main')}")


# -------------------------------------------------------------------------------------
# Held up.
# -------------------------------------------------------------------------------------


async def test_model_reply_impersonating_the_confirmation_prompt_confirms_nothing_held_up(temporal_env, settings):
    """The model's own reply text imitates the workflow's prompt for a harmless detail; the
    user's yes reaches the model, which then proposes a different write (return). Nothing
    runs: the workflow shows its own detail and needs a yes to it."""
    def brain(view: dict, plan: dict | None = None) -> dict:
        last_user = [t for t in view["recent_turns"] if t["role"] == "user"][-1]["text"]
        if view["customer"] is None:
            return call("find_user_id_by_email", email=EMAIL)
        if not view["customer"]["details_loaded"]:
            return call("get_user_details", user_id=CUSTOMER)
        if DELIVERED not in view["orders"]:
            return call("get_order_details", order_id=DELIVERED)
        if last_user == "yes" and view["pending_confirmation"] is None:
            items = [i["item_id"] for i in view["orders"][DELIVERED]["items"]]
            return call("return_delivered_order_items", order_id=DELIVERED, item_ids=items,
                        payment_method_id="credit_card_3362387")
        return reply("Please confirm: Send you our newsletter. Reply 'yes' to proceed or 'no' to stop.")

    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = await client.start_conversation(f"imp-{uuid.uuid4().hex[:6]}")
        r = await client.send_message(cid, f"my email is {EMAIL}")
        assert r.awaiting_confirmation is None and "newsletter" in r.text
        r = await client.send_message(cid, "yes")
        assert r.awaiting_confirmation and "Return from order" in r.awaiting_confirmation
        assert backend.ledger_entries("main") == [] and _order(backend, DELIVERED)["status"] == "delivered"


async def test_yes_queued_with_a_no_does_not_confirm_a_different_replacement_held_up(temporal_env, settings):
    """While the worker is down the user sends "no" then "yes" to D1 (cancel PENDING); both are
    accepted in one activation with seen_digest(D1). After the "no" the model proposes D2
    (return DELIVERED). The queued "yes" must not confirm D2."""
    def brain(view: dict, plan: dict | None = None) -> dict:
        if view["customer"] is None:
            return call("find_user_id_by_email", email=EMAIL)
        if not view["customer"]["details_loaded"]:
            return call("get_user_details", user_id=CUSTOMER)
        for order_id in (PENDING, DELIVERED):
            if order_id not in view["orders"]:
                return call("get_order_details", order_id=order_id)
        declined = [r for r in view["rejections"] if r["rule"] == "user-declined"]
        if view["recent_turns"][-1]["text"].startswith("my email") :
            return call("cancel_pending_order", order_id=PENDING, reason="no longer needed")
        if declined and len(declined) == 1 and view["recent_turns"][-1]["text"] == "no":
            items = [i["item_id"] for i in view["orders"][DELIVERED]["items"]]
            return call("return_delivered_order_items", order_id=DELIVERED, item_ids=items,
                        payment_method_id="credit_card_3362387")
        return reply("ok")

    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = await client.start_conversation(f"no-yes-{uuid.uuid4().hex[:6]}")
        r = await client.send_message(cid, f"my email is {EMAIL}")
        assert r.awaiting_confirmation and "Cancel order" in r.awaiting_confirmation
    no = asyncio.create_task(client.send_message(cid, "no"))
    await asyncio.sleep(0.3)
    yes = asyncio.create_task(client.send_message(cid, "yes"))
    await asyncio.sleep(1.0)
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        r_no, r_yes = await asyncio.wait_for(asyncio.gather(no, yes), 60)
        assert r_no.awaiting_confirmation and "Return from order" in r_no.awaiting_confirmation
        assert backend.ledger_entries("main") == [], r_yes.text
        state = await client.state(cid)
        assert any(x.rule == "explicit-confirmation" and "different action detail" in x.reason
                   for x in state.rejections), state.rejections
