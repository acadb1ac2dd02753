"""Model calls per message on a real server: state-driven reads before the model is asked,
batched reads (parallel tool use) and their limits, write outcomes the workflow words itself,
and the named-target clause in a conversation (the offline stand-in picks the order named last)."""

from __future__ import annotations

import uuid
from typing import Any, Optional

from tests.faults import DelegatingPort
from tests.policy_fixtures import CUSTOMER, DELIVERED, DELIVERED_2, EMAIL, PENDING, other_customer_order
from tests.workflow_harness import ListBrain, call, reply, running_worker
from workflows.domain import replies
from workflows.domain.actions import MAX_READS_PER_BATCH


class CountingReads(DelegatingPort):
    """Counts every read the system of record answers, by tool; ``down`` makes reads of that tool
    fail as a connection that cannot be made does (retryable, so Temporal retries it)."""

    def __init__(self, down: Optional[str] = None) -> None:
        self._inner: Any = None
        self.down = down
        self.reads: list[tuple[str, dict]] = []

    def attach(self, inner: Any) -> "CountingReads":
        self._inner = inner
        return self

    def invoke(self, store, tool, arguments, *, idempotency_key=None, scope_user_id=None, guard=None):
        if idempotency_key is None:
            self.reads.append((tool, dict(arguments)))
            if tool == self.down:
                raise ConnectionError("the order database cannot be reached")
        return self._inner.invoke(store, tool, arguments, idempotency_key=idempotency_key,
                                  scope_user_id=scope_user_id, guard=guard)


def _cid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


async def test_one_model_call_sees_the_customer_their_profile_and_the_order_the_message_names(temporal_env, settings):
    brain = ListBrain([call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake")])
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = await client.start_conversation(_cid("one-call"))
        shown = await client.send_message(cid, f"Hi, my email is {EMAIL}. Please cancel {PENDING}, I ordered it by mistake")
        assert shown.awaiting_confirmation and PENDING in shown.awaiting_confirmation
        [view] = brain.views  # one model call for the whole message
        assert view["customer"]["user_id"] == CUSTOMER and view["customer"]["details_loaded"]
        assert PENDING in view["orders"]
        done = await client.send_message(cid, "yes")
        assert len(brain.views) == 1  # the outcome is worded by the workflow
        assert done.text.startswith("Your request is done: ") and f"Order {PENDING} is now cancelled." in done.text
        state = await client.state(cid)
        assert state.usage.model_calls == 1 and [op.ok for op in state.completed_operations] == [True]


async def test_a_refused_write_is_told_without_a_model_call_and_nothing_changes(temporal_env, settings):
    brain = ListBrain([call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake")])
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = await client.start_conversation(_cid("refused"))
        await client.send_message(cid, f"my email is {EMAIL}; cancel {PENDING}, ordered by mistake")
        backend.invoke("main", "cancel_pending_order", {"order_id": PENDING, "reason": "no longer needed"},
                       idempotency_key="someone-else")  # the order changes under the conversation
        told = await client.send_message(cid, "yes")
        assert len(brain.views) == 1 and "did not go through" in told.text or told.text == replies.CHANGED_SINCE_CONFIRMED
        assert (await client.state(cid)).pending_confirmation is None


async def test_the_stand_in_answers_about_and_proposes_the_order_named_last(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, _):
        cid = await client.start_conversation(_cid("named-last"))
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert DELIVERED in (await client.send_message(cid, f"What is the status of {DELIVERED}?")).text
        assert PENDING in (await client.send_message(cid, f"{PENDING}?")).text
        again = await client.send_message(cid, f"{DELIVERED} again?")
        assert DELIVERED in again.text and PENDING not in again.text
        cancel = await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        assert cancel.awaiting_confirmation and PENDING in cancel.awaiting_confirmation


async def test_a_write_on_another_order_than_the_one_named_is_refused_with_the_clause(temporal_env, settings):
    wrong = call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake")
    brain = ListBrain([reply("Hello Raj."), wrong, reply("Which order do you mean?")])
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = await client.start_conversation(_cid("named-target"))
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        before = backend.hash("main")
        answer = await client.send_message(cid, f"Please return everything from {DELIVERED_2}")
        assert answer.text == "Which order do you mean?" and answer.awaiting_confirmation is None
        state = await client.state(cid)
        assert state.rejections[-1].rule == "named-target" and DELIVERED_2 in state.rejections[-1].reason
        assert brain.views[-1]["rejections"][-1]["rule"] == "named-target"  # the model can act on it
        assert backend.hash("main") == before and state.pending_confirmation is None


async def test_a_batch_runs_its_reads_together_and_refuses_a_write_in_it(temporal_env, settings):
    port = CountingReads()
    batch = [call("get_order_details", order_id=PENDING),
             call("cancel_pending_order", order_id=PENDING, reason="no longer needed"),
             call("get_order_details", order_id=DELIVERED), call("get_order_details", order_id=PENDING)]
    brain = ListBrain([reply("Hello Raj."), batch, reply("read them")])
    async with running_worker(temporal_env, settings, brain=brain, wrap_port=port.attach) as (client, backend):
        cid = await client.start_conversation(_cid("batch"))
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        before, port.reads = backend.hash("main"), []
        answer = await client.send_message(cid, "what about my orders?")
        assert answer.text == "read them" and answer.awaiting_confirmation is None
        assert sorted(port.reads, key=str) == sorted([("get_order_details", {"order_id": PENDING}),
                                                      ("get_order_details", {"order_id": DELIVERED})], key=str)
        state = await client.state(cid)
        assert {PENDING, DELIVERED} <= set(state.orders) and backend.hash("main") == before
        [refused] = [r for r in state.rejections if r.turn == state.turn]
        assert refused.rule == "one-action" and refused.proposal["tool"]["name"] == "cancel_pending_order"
        assert state.usage.model_calls == 3  # the greeting, the batch, the reply after it


async def test_a_batch_of_forty_reads_runs_the_cap_and_refuses_the_rest_with_a_reason(temporal_env, settings):
    port = CountingReads()
    other, _ = other_customer_order()
    reads = [call("get_product_details", product_id=str(1000000000 + n)) for n in range(39)]
    brain = ListBrain([reply("Hello Raj."), [call("get_order_details", order_id=other), *reads], reply("done")])
    roomy = settings.model_copy(update={"model_max_tokens": 8192})  # forty calls' output fits the answer
    async with running_worker(temporal_env, roomy, brain=brain, wrap_port=port.attach) as (client, _):
        cid = await client.start_conversation(_cid("batch-40"))
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        port.reads = []
        assert (await client.send_message(cid, "look everything up")).text == "done"
        assert len(port.reads) == MAX_READS_PER_BATCH
        state = await client.state(cid)
        turn = [r for r in state.rejections if r.turn == state.turn]
        assert len(turn) == 40 - MAX_READS_PER_BATCH and {r.rule for r in turn} == {"one-action"}
        assert other not in state.orders  # another customer's order: not found, as alone
        assert any(o.tool == "get_order_details" and "not found" in o.result for o in state.observations)


async def test_a_state_driven_read_whose_system_is_down_is_recorded_and_not_retried(temporal_env, settings):
    port = CountingReads(down="find_user_id_by_email")
    brain = ListBrain([reply("I see the order system had trouble.")])
    async with running_worker(temporal_env, settings, brain=brain, wrap_port=port.attach) as (client, _):
        cid = await client.start_conversation(_cid("down"))
        first = await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert first.text == replies.SYSTEM_UNAVAILABLE and brain.views == []
        attempts = len(port.reads)
        assert 1 <= attempts <= 6  # Temporal's retries of one read (READ_RETRY), no more
        second = await client.send_message(cid, "hello?")
        assert second.text == "I see the order system had trouble."
        assert len(port.reads) == attempts  # not run again by the workflow
        assert brain.views[0]["rejections"][-1]["rule"] == "tool-error"
        state = await client.state(cid)
        assert state.customer is None and state.is_open()


async def test_fifty_order_ids_in_a_message_read_at_most_three_of_the_customers_own(temporal_env, settings):
    port = CountingReads()
    other, _ = other_customer_order()
    brain = ListBrain([reply("Hello Raj."), reply("which one?")])
    async with running_worker(temporal_env, settings, brain=brain, wrap_port=port.attach) as (client, _):
        cid = await client.start_conversation(_cid("fifty"))
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        port.reads = []
        ids = [other, "#W12345", PENDING, DELIVERED, DELIVERED_2, *(f"#W{n:07d}" for n in range(45))]
        await client.send_message(cid, " ".join(ids))
        assert sorted(args["order_id"] for tool, args in port.reads if tool == "get_order_details") == sorted(
            [PENDING, DELIVERED, DELIVERED_2])  # only the customer's own, each once
        assert len(port.reads) == 3
