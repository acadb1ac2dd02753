"""Breaker tests: SupportWorkflow on a real Temporal dev server, real worker, real SQLite.

The model is the only part faked, at its boundary (a test brain behind the Messages API
wire format). Each test asserts what the README/docstrings promise; a failure is a defect.

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
from temporalio.client import WorkflowUpdateStage
from temporalio.worker import Replayer

from activities.llm.model_activity import ModelActivities, build_client
from starter.client import ConversationError, StatekeeperClient
from starter.connection import data_converter
from systems.model.server import start_in_thread
from tests.policy_fixtures import CUSTOMER, DELIVERED, EMAIL, PENDING
from tests.workflow_harness import running_worker
from worker import build_backend, build_worker, workflow_runner
from workflows.contracts import AssistantReply, UserMessage
from workflows.refund import RefundWorkflow
from workflows.support import SupportWorkflow, support_workflow_id


def call(name: str, **arguments) -> dict:
    return {"kind": "tool_call", "tool": {"name": name, "arguments": arguments}}


def reply(text: str) -> dict:
    return {"kind": "reply", "text": text}


class ListBrain:
    """Returns the queued actions in order, then replies 'ok'. Records every view."""

    def __init__(self, actions: list[dict]) -> None:
        self.actions = list(actions)
        self.views: list[dict] = []

    def __call__(self, view: dict, plan: dict | None = None) -> dict:
        self.views.append(view)
        return self.actions.pop(0) if self.actions else reply("ok")


def _order(backend, order_id: str, store: str = "main") -> dict:
    return json.loads(backend.read(store, "get_order_details", {"order_id": order_id}))


def _user(backend, user_id: str, store: str = "main") -> dict:
    return json.loads(backend.read(store, "get_user_details", {"user_id": user_id}))


# -------------------------------------------------------------------------------------
# 1. A "yes" that was sent before the detail was shown confirms it (duplicate/retried
#    message, or a message typed while the agent was still working).
# -------------------------------------------------------------------------------------


async def test_yes_sent_before_detail_was_shown_does_not_confirm_it(temporal_env, settings):
    """The user confirms D1 (cancel PENDING). Their HTTP client retries the same "yes"
    (or they send it twice) while the agent is still working on the first one. Meanwhile the
    model proposes D2 (return all of DELIVERED to the original card). The second "yes" was
    sent before D2 existed, yet it is taken as the explicit confirmation of D2 and the return
    is applied. policy.validate_execution only checks confirmation.turn > proposed_turn,
    not that the user had seen the detail when they wrote the yes."""
    reached = threading.Event()
    release = threading.Event()
    delivered_items = None

    def brain(view: dict, plan: dict | None = None) -> dict:
        nonlocal delivered_items
        orders = view["orders"]
        done = {op["tool"] for op in view["completed_operations"] if op["ok"]}
        if view["customer"] is None:
            return call("find_user_id_by_email", email=EMAIL)
        if not view["customer"]["details_loaded"]:
            return call("get_user_details", user_id=CUSTOMER)
        if PENDING not in orders:
            return call("get_order_details", order_id=PENDING)
        if DELIVERED not in orders:
            return call("get_order_details", order_id=DELIVERED)
        if "cancel_pending_order" not in done:
            if view["pending_confirmation"] is None and view["recent_turns"][-1]["role"] == "user" \
                    and "cancel" in view["recent_turns"][-1]["text"]:
                return call("cancel_pending_order", order_id=PENDING, reason="no longer needed")
            return reply("What can I do for you?")
        if "return_delivered_order_items" not in done and not any(
                r["rule"] == "user-declined" for r in view["rejections"]):
            # the model chains the next write right after the first one, in the same turn
            if not reached.is_set():
                reached.set()
                release.wait(30)
            items = [i["item_id"] for i in orders[DELIVERED]["items"]]
            return call("return_delivered_order_items", order_id=DELIVERED, item_ids=items,
                        payment_method_id="credit_card_3362387")
        return reply("Done.")

    server = start_in_thread(brain)
    try:
        model = ModelActivities(build_client("test-key", server.base_url, 30.0), model="test-brain")
        backend = build_backend(settings)
        async with build_worker(temporal_env.client, settings, backend, model=model):
            client = StatekeeperClient(temporal_env.client, settings.task_queue)
            cid = await client.start_conversation(f"yes-early-{uuid.uuid4().hex[:6]}")
            first = await client.send_message(cid, f"my email is {EMAIL}. please cancel {PENDING}")
            assert first.awaiting_confirmation and PENDING in first.awaiting_confirmation
            yes = asyncio.create_task(client.send_message(cid, "yes"))
            while not reached.is_set():  # the cancel ran; the model is about to propose D2
                await asyncio.sleep(0.05)
            assert not yes.done()
            handle = temporal_env.client.get_workflow_handle(support_workflow_id(cid))
            # the retried "yes" (same words, sent before any reply to the first one arrived)
            retried = await handle.start_update(SupportWorkflow.send_message, UserMessage(text="yes"),
                                                wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                                                result_type=AssistantReply)
            release.set()
            first_yes = await yes
            await retried.result()
            # the user saw D2 only in the reply to the first yes, and never answered it
            assert first_yes.awaiting_confirmation and DELIVERED in first_yes.awaiting_confirmation
            assert _order(backend, DELIVERED)["status"] == "delivered", \
                "the return was applied on a 'yes' sent before its detail was shown"
    finally:
        release.set()
        server.stop()


# -------------------------------------------------------------------------------------
# 2. Authentication is not bound to anything the user said.
# -------------------------------------------------------------------------------------


async def test_model_cannot_authenticate_an_identity_the_user_never_gave(temporal_env, settings):
    """The user gives no identity at all. The model looks up a customer's email on its own
    (hallucination, prompt injection, 'did you mean ...'); the workflow accepts it as the
    authenticated customer and then lets the model act on that customer's orders. Pinned
    facts hold what the user typed (kind email / name / zip), yet authenticate-first is
    satisfied by any email the model picks."""
    brain = ListBrain([
        call("find_user_id_by_email", email=EMAIL),
        call("get_user_details", user_id=CUSTOMER),
        call("get_order_details", order_id=PENDING),
        call("cancel_pending_order", order_id=PENDING, reason="no longer needed"),
    ])
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = await client.start_conversation(f"auth-invented-{uuid.uuid4().hex[:6]}")
        reply_ = await client.send_message(cid, "hi, I want to cancel my last order, I no longer need it")
        state = await client.state(cid)
        assert state.customer is None, (
            f"authenticated as {state.customer.user_id} from an email the user never typed; "
            f"pinned facts: {[(f.kind, f.value) for f in state.pinned_facts]}; reply: {reply_.text!r}")


# -------------------------------------------------------------------------------------
# 3. Payment change then cancel: the confirmed detail is not what happens, and the
#    customer is refunded several times the order total (gift card credited 3x).
# -------------------------------------------------------------------------------------

ETHAN, ETHAN_EMAIL, ETHAN_ORDER = "ethan_lopez_6291", "ethan.lopez8943@example.com", "#W6779827"
ETHAN_GIFT, ETHAN_CARD = "gift_card_7219486", "credit_card_9789590"


async def test_cancel_after_payment_change_refunds_at_most_the_order_total(temporal_env, settings):
    brain = ListBrain([
        call("find_user_id_by_email", email=ETHAN_EMAIL),
        call("get_user_details", user_id=ETHAN),
        call("get_order_details", order_id=ETHAN_ORDER),
        call("modify_pending_order_payment", order_id=ETHAN_ORDER, payment_method_id=ETHAN_CARD),
        reply("Your order is now paid with your card."),
        call("cancel_pending_order", order_id=ETHAN_ORDER, reason="no longer needed"),
        reply("Cancelled."),
    ])
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        before = _user(backend, ETHAN)["payment_methods"][ETHAN_GIFT]["balance"]
        paid = _order(backend, ETHAN_ORDER)["payment_history"][0]["amount"]
        cid = await client.start_conversation(f"pay-then-cancel-{uuid.uuid4().hex[:6]}")
        r = await client.send_message(cid, f"my email is {ETHAN_EMAIL}, pay {ETHAN_ORDER} with {ETHAN_CARD}")
        assert r.awaiting_confirmation
        await client.send_message(cid, "yes")
        r = await client.send_message(cid, "actually cancel it, no longer needed")
        detail = r.awaiting_confirmation
        if detail is None:
            # refused by the policy: the order stays as it was and no money moves
            state = await client.state(cid)
            assert state.rejections[-1].rule == "cancel-pending-only", state.rejections[-1]
            assert "more than was paid" in state.rejections[-1].reason
            assert _order(backend, ETHAN_ORDER)["status"] == "pending"
            assert _user(backend, ETHAN)["payment_methods"][ETHAN_GIFT]["balance"] >= before
            return
        assert "Cancel order" in detail
        await client.send_message(cid, "yes")
        order = _order(backend, ETHAN_ORDER)
        after = _user(backend, ETHAN)["payment_methods"][ETHAN_GIFT]["balance"]
        refunded = sum(p["amount"] for p in order["payment_history"] if p["transaction_type"] == "refund")
        charged = sum(p["amount"] for p in order["payment_history"] if p["transaction_type"] == "payment")
        assert refunded <= charged - paid + 0.01 or refunded <= paid + 0.01, (
            f"one purchase of {paid}: charged {charged}, refunded {refunded}; gift card {before} -> {after}; "
            f"the user confirmed: {detail!r}")


# -------------------------------------------------------------------------------------
# 4. Escalation and post-write reads fail the workflow when the database misbehaves.
# -------------------------------------------------------------------------------------


async def test_refresh_read_failure_after_a_refund_does_not_fail_the_conversation(temporal_env, settings,
                                                                                          tmp_path):
    """After a refund write commits, SupportWorkflow._execute refreshes the user with an
    un-guarded activity call (support.py: `await self._read(refresh)` outside the try).
    If that read cannot run, the ActivityError escapes `run` and the whole conversation
    FAILS (the user gets a 409 'has finished'), although the write is done and 'read
    failures become replies' elsewhere. The fault: the store becomes unreadable right
    after the commit (the test's stand-in for a database outage)."""
    marker = tmp_path / "committed.marker"
    brain = ListBrain([
        call("find_user_id_by_email", email=EMAIL),
        call("get_user_details", user_id=CUSTOMER),
        call("get_order_details", order_id=PENDING),
        call("cancel_pending_order", order_id=PENDING, reason="no longer needed"),
    ])
    async with running_worker(temporal_env, settings, brain=brain, pause_after_write=(2.0, marker)) as (client, backend):
        cid = await client.start_conversation(f"refresh-fail-{uuid.uuid4().hex[:6]}")
        r = await client.send_message(cid, f"my email is {EMAIL}, cancel {PENDING}")
        assert r.awaiting_confirmation
        yes = asyncio.create_task(client.send_message(cid, "yes"))
        while not marker.exists():
            await asyncio.sleep(0.05)
        await asyncio.to_thread(backend.drop_store, "main")  # unreadable from now on
        try:
            result = await asyncio.wait_for(yes, 60)
        except ConversationError as err:
            desc = await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).describe()
            pytest.fail(f"the conversation ended as {desc.status.name} after an applied cancel: "
                        f"send_message raised {err.kind}: {err}")
        assert result.status in ("active", "escalated")


async def test_escalation_survives_a_database_that_refuses_writes(temporal_env, settings):
    """README: 'If a write's outcome cannot be shown after its retries, the conversation
    stops and escalates to a human (a ticket)'. The ticket lives in the same database as the
    write; when that database refuses writes (the very reason the write failed), open_ticket
    exhausts its retries, the ActivityError escapes SupportWorkflow.run and the conversation
    FAILS instead of being ESCALATED."""
    settings = settings.model_copy(update={"write_timeout_seconds": 2.0})
    brain = ListBrain([
        call("find_user_id_by_email", email=EMAIL),
        call("get_user_details", user_id=CUSTOMER),
        call("get_order_details", order_id=PENDING),
        call("modify_pending_order_address", order_id=PENDING, address1="1 Main St", address2="",
             city="Austin", state="TX", country="USA", zip="78701"),
    ])
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = await client.start_conversation(f"escalate-db-{uuid.uuid4().hex[:6]}")
        r = await client.send_message(cid, f"my email is {EMAIL}, change the address of {PENDING}")
        assert r.awaiting_confirmation
        # the database starts refusing inserts (a stand-in for a full disk / failing primary)
        with backend.engine.begin() as conn:
            for table in ("ledger", "tickets"):
                conn.exec_driver_sql(f"CREATE TRIGGER breaker_{table} BEFORE INSERT ON {table} "
                                     "BEGIN SELECT RAISE(ABORT, 'database refuses writes'); END")
        try:
            result = await asyncio.wait_for(client.send_message(cid, "yes"), 240)
        except ConversationError as err:
            desc = await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).describe()
            pytest.fail(f"the conversation ended as {desc.status.name}, not escalated: {err.kind}: {err}")
        assert result.status == "escalated"


# -------------------------------------------------------------------------------------
# 5. Unbounded state: legal 8 KB messages kill the conversation.
# -------------------------------------------------------------------------------------


async def test_many_legal_messages_do_not_kill_the_conversation(temporal_env, settings):
    """Each message is <= 8 KB (accepted by the validator). Every 5-digit number is pinned
    forever and rendered into every model snapshot (an activity input). After ~25 messages
    the snapshot passes Temporal's 2 MB payload limit and the conversation dies."""
    async with running_worker(temporal_env, settings) as (client, _):
        cid = await client.start_conversation(f"big-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        for turn in range(32):
            words, n = [], 0
            while len(" ".join(words)) < 8180:
                words.append(f"{(turn * 2000 + n) % 100000:05d}")
                n += 1
            text = " ".join(words)
            assert len(text.encode()) <= 8192
            try:
                r = await asyncio.wait_for(client.send_message(cid, text), 60)
            except (ConversationError, asyncio.TimeoutError) as err:
                desc = await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).describe()
                pytest.fail(f"message {turn + 2} (legal, {len(text.encode())} bytes): {type(err).__name__} "
                            f"{getattr(err, 'kind', '')} {err}; workflow {desc.status.name}")
            assert r.status == "active"


# -------------------------------------------------------------------------------------
# 6. Things that held up (kept as regression tests).
# -------------------------------------------------------------------------------------


async def test_replay_of_real_histories_is_deterministic(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        cid = await client.start_conversation(f"replay-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        await client.send_message(cid, f"Please return everything from {DELIVERED}")
        await client.send_message(cid, "yes")
        await client.send_message(cid, f"cancel {PENDING}, ordered by mistake")
        await client.send_message(cid, "yes")
        state = await client.state(cid)
        assert len([op for op in state.completed_operations if op.ok]) == 2
        await client.cancel(cid, "done")
        await client.outcome(cid)
        histories = [await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).fetch_history()]
        for op in state.completed_operations:
            histories.append(await temporal_env.client.get_workflow_handle(op.child_workflow_id).fetch_history())
    replayer = Replayer(workflows=[SupportWorkflow, RefundWorkflow], data_converter=data_converter(),
                        workflow_runner=workflow_runner())
    for history in histories:
        await replayer.replay_workflow(history)


async def test_exact_8192_bytes_multibyte_accepted_8193_rejected(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, _):
        cid = await client.start_conversation(f"boundary-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        ok = "\u20ac" * 2730 + "ab"  # 3 * 2730 + 2 = 8192 bytes
        assert len(ok.encode()) == 8192
        await client.send_message(cid, ok)
        with pytest.raises(ConversationError) as err:
            await client.send_message(cid, ok + "a")
        assert err.value.kind == "invalid_message"
        with pytest.raises(ConversationError) as err:
            await client.send_message(cid, "\u20ac" * 2731)  # 8193 bytes, 2731 chars
        assert err.value.kind == "invalid_message"


async def test_cancel_signal_while_awaiting_confirmation_writes_nothing(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        cid = await client.start_conversation(f"cancel-pending-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        r = await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        assert r.awaiting_confirmation
        await client.cancel(cid, "hung up")
        outcome = await asyncio.wait_for(client.outcome(cid), 20)
        assert outcome.status == "cancelled" and outcome.state.pending_confirmation is None
        with pytest.raises(ConversationError) as err:
            await client.send_message(cid, "yes")
        assert err.value.kind == "finished"
        assert _order(backend, PENDING)["status"] == "pending" and backend.ledger_entries("main") == []


async def test_concurrent_yes_messages_apply_once(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        cid = await client.start_conversation(f"double-yes-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        r = await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        assert r.awaiting_confirmation
        replies = await asyncio.gather(*(client.send_message(cid, "yes") for _ in range(5)))
        assert sorted(r.turn for r in replies) == list(range(3, 8))
        assert len(backend.ledger_entries("main")) == 1 and backend.duplicate_writes("main") == 0


async def test_second_item_modification_and_other_customers_payment_refused(temporal_env, settings):
    from tests.policy_fixtures import other_variant
    old, new = other_variant(PENDING)
    old2, new2 = other_variant(PENDING, index=1)
    from tests.policy_fixtures import data
    product = data()["orders"][PENDING]["items"]
    brain = ListBrain([
        call("find_user_id_by_email", email=EMAIL),
        call("get_user_details", user_id=CUSTOMER),
        call("get_order_details", order_id=PENDING),
        *[call("get_product_details", product_id=i["product_id"]) for i in product],
        # another customer's payment method
        call("modify_pending_order_items", order_id=PENDING, item_ids=[old], new_item_ids=[new],
             payment_method_id="credit_card_9789590"),
        call("modify_pending_order_items", order_id=PENDING, item_ids=[old], new_item_ids=[new],
             payment_method_id="credit_card_3362387"),
        reply("done"),
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


# -------------------------------------------------------------------------------------
# 7. Confirmation words, end to end.
# -------------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", ["ok, never mind", "yes? what is the refund exactly?"])
async def test_withdrawal_or_question_does_not_apply_the_write(temporal_env, settings, answer):
    async with running_worker(temporal_env, settings) as (client, backend):
        cid = await client.start_conversation(f"not-yes-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        r = await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        assert r.awaiting_confirmation
        await client.send_message(cid, answer)
        assert _order(backend, PENDING)["status"] == "pending", f"{answer!r} cancelled the order"


async def test_client_refuses_unencodable_text_as_invalid_message(temporal_env, settings):
    """starter/client.py: refusals raise ConversationError(kind='invalid_message'). A lone
    surrogate makes the pydantic converter raise PydanticSerializationError instead."""
    async with running_worker(temporal_env, settings) as (client, _):
        cid = await client.start_conversation(f"surrogate-{uuid.uuid4().hex[:6]}")
        with pytest.raises(ConversationError) as err:
            await client.send_message(cid, "hello \ud800")
        assert err.value.kind == "invalid_message"


async def test_cancel_signal_during_a_running_write_records_it(temporal_env, settings, tmp_path):
    marker = tmp_path / "committed.marker"
    async with running_worker(temporal_env, settings, pause_after_write=(1.5, marker)) as (client, backend):
        cid = await client.start_conversation(f"cancel-running-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        r = await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        assert r.awaiting_confirmation
        yes = asyncio.create_task(client.send_message(cid, "yes"))
        while not marker.exists():
            await asyncio.sleep(0.05)
        await client.cancel(cid, "hung up mid-write")
        answer = await asyncio.wait_for(yes, 30)
        outcome = await asyncio.wait_for(client.outcome(cid), 30)
        assert outcome.status == "cancelled"
        [op] = outcome.state.completed_operations
        assert op.ok and _order(backend, PENDING)["status"] == "cancelled"
        assert len(backend.ledger_entries("main")) == 1
        # the reply to the yes does not say the order was cancelled (only 'conversation cancelled')
        print("reply to yes:", answer.text)
