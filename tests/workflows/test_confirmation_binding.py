"""Confirmation binding in running conversations: a write runs only on a yes the user
sent after its detail was shown, to that detail and that proposal; a retried, duplicated
or queued yes, a withdrawal or a question, or a yes to the model's own imitation of the
prompt confirms nothing, and concurrent yeses apply the write once.

SupportWorkflow on a real Temporal dev server, a real worker and SQLite; only the model
is faked, at its boundary (a test brain behind the Messages API wire format).
"""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
from temporalio.client import WorkflowUpdateStage

from activities.llm.model_activity import ModelActivities, build_client
from starter.client.conversations import StatekeeperClient
from systems.model.server import start_in_thread
from tests.policy_fixtures import CUSTOMER, DELIVERED, EMAIL, PENDING
from tests.workflow_harness import NO_APPROVALS, call, order_details, reply, running_worker, until
from starter.runtime.worker import build_backend, build_worker
from workflows.domain.contracts import AssistantReply, UserMessage
from workflows.domain.replies import SUPERSEDED
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id


async def test_yes_sent_before_detail_was_shown_does_not_confirm_it(temporal_env, settings):
    """The user confirms D1 (cancel PENDING); it runs and the workflow tells its outcome. The
    user then asks for D2 (return all of DELIVERED to the original card), and while the model
    proposes it, a second "yes" arrives (the user's client retries the first one, or they sent
    it twice, and it comes late). That "yes" was sent before D2 existed: it does not confirm D2,
    and the return is not applied. A later message than the proposal's is not enough: the user
    must have seen the detail when they wrote the yes."""
    reached = threading.Event()
    release = threading.Event()

    def brain(view: dict, plan: dict | None = None) -> dict:
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
            if not reached.is_set():  # the model takes its time over D2, the first time
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
            client = StatekeeperClient(temporal_env.client, settings.task_queue, approvals=NO_APPROVALS)
            cid = await client.start_conversation(f"yes-early-{uuid.uuid4().hex[:6]}")
            first = await client.send_message(cid, f"my email is {EMAIL}. please cancel {PENDING}")
            assert first.awaiting_confirmation and PENDING in first.awaiting_confirmation
            done = await client.send_message(cid, "yes")
            assert done.text.startswith("Your request is done:") and done.awaiting_confirmation is None
            assert order_details(backend, PENDING)["status"] == "cancelled"
            ask = asyncio.create_task(client.send_message(cid, f"please also return everything from {DELIVERED}"))
            await until(reached.is_set, "the model proposing D2")  # D2 exists nowhere yet
            assert not ask.done()
            handle = temporal_env.client.get_workflow_handle(support_workflow_id(cid))
            # the second "yes" (same words as the first, sent before any D2 was shown)
            retried = await handle.start_update(SupportWorkflow.send_message, UserMessage(text="yes"),
                                                wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                                                result_type=AssistantReply)
            release.set()
            asked = await asyncio.wait_for(ask, 30)
            second = await asyncio.wait_for(retried.result(), 30)
            # D2, proposed while the second yes waited, is superseded by it (docs/concepts.md, "Interrupts");
            # the second yes, sent before D2 was ever shown, does not confirm it: D2 is shown now
            assert asked.text == SUPERSEDED and asked.awaiting_confirmation is None
            assert second.awaiting_confirmation and DELIVERED in second.awaiting_confirmation
            assert order_details(backend, DELIVERED)["status"] == "delivered", \
                "the return was applied on a 'yes' sent before its detail was shown"
            assert [e["tool"] for e in backend.ledger_entries("main")] == ["cancel_pending_order"]
    finally:
        release.set()
        server.stop()


async def test_concurrent_yes_messages_apply_once(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        cid = await client.start_conversation(f"double-yes-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        r = await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        assert r.awaiting_confirmation
        replies = await asyncio.gather(*(client.send_message(cid, "yes") for _ in range(5)))
        assert sorted(r.turn for r in replies) == list(range(3, 8))
        assert len(backend.ledger_entries("main")) == 1 and backend.duplicate_writes("main") == 0


# --- a withdrawal or a question is not a yes ------------------------------------------


@pytest.mark.parametrize("answer", ["ok, never mind", "yes? what is the refund exactly?"])
async def test_withdrawal_or_question_does_not_apply_the_write(temporal_env, settings, answer):
    async with running_worker(temporal_env, settings) as (client, backend):
        cid = await client.start_conversation(f"not-yes-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        r = await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        assert r.awaiting_confirmation
        await client.send_message(cid, answer)
        assert order_details(backend, PENDING)["status"] == "pending", f"{answer!r} cancelled the order"


# --- the binding is to the proposal that was shown, not to the call's content ----------

NEW_ADDRESS = dict(address1="1 Elm St", address2="", city="Austin", state="TX", country="USA", zip="78701")


async def test_stale_duplicate_yes_does_not_confirm_a_later_proposal(temporal_env, settings):
    """The user double-submits "yes" to D1 (address change of PENDING) while the worker is
    down; both messages are accepted with seen_digest = digest(D1). The first runs D1. The
    model then proposes the identical change again (new operation id, new pending step).
    The second "yes" was sent before that proposal existed: it does not confirm it, although the
    digest of the call's content is the same (a second write the user never saw a prompt for)."""
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


async def test_model_reply_impersonating_the_confirmation_prompt_confirms_nothing(temporal_env, settings):
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
        assert backend.ledger_entries("main") == [] and order_details(backend, DELIVERED)["status"] == "delivered"


async def test_yes_queued_with_a_no_does_not_confirm_a_different_replacement(temporal_env, settings):
    """While the worker is down the user sends "no" then "yes" to D1 (cancel PENDING); both are
    accepted in one activation with seen_digest(D1). After the "no" the model proposes D2
    (return DELIVERED), superseded by the queued "yes", which must not confirm it."""
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
        # D2, proposed after the "no" while the "yes" waited, is superseded by it (docs/concepts.md,
        # "Interrupts"): never shown, so the queued "yes" has nothing to confirm
        assert r_no.text == SUPERSEDED and r_no.awaiting_confirmation is None
        assert backend.ledger_entries("main") == [], r_yes.text
        state = await client.state(cid)
        assert any(x.rule == "superseded-by-newer-message" and x.proposal["tool"]["name"] ==
                   "return_delivered_order_items" for x in state.rejections), state.rejections
