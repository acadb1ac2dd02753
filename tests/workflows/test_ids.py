"""Ids as callers and models send them, on a real Temporal dev server with a real worker:

- ids near Temporal's length limit (``limit.maxIDLength``, 1000 bytes for a workflow or an
  update id) through the Python client: Temporal's ``INVALID_ARGUMENT`` for an id over the
  limit (a message id or a conversation id too long, an empty refund id) is a refusal, never
  ``unavailable`` ("Temporal is not reachable; retry later") that a caller would retry for
  ever; and a conversation whose id is long but valid (its workflow id fits) has approvals that
  can be decided (the decision's update id, ``decide-<approval id>-<decision>-<approver>``,
  stays within the limit);
- operator commands (``state``, ``replay-check``, ``resume``, ``resolve``) given a conversation
  id that itself starts with ``support-`` (the API's ids allow it) act on that conversation,
  never on the one whose workflow id it also spells;
- an order id in the wrong shape, or another customer's order, reaches the system of record
  scoped to the authenticated customer and comes back as "not found", revealing nothing, and
  the conversation goes on to the right order. Argument models constrain types and sizes;
  business formats are judged by the system of record or the policy, with a reason the model
  can act on (an id pattern in the argument model would turn such a lookup into malformed
  model output and stall the conversation).
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any, Optional

import pytest

from starter.client.conversation_ids import conversation_named
from starter.client.conversations import ConversationError
from starter.ops.replay_check import Systems, check
from starter.ops.taubench import Task, TauBenchRunner, load_tasks
from tests.policy_fixtures import EMAIL, PENDING, other_customer_order
from tests.workflow_harness import order_details, running_worker, until
from workflows.domain.catalogue import CATALOGUE
from workflows.domain.policy.approvals import ApprovalPolicy, ApprovalStatus


# --- Ids near Temporal's length limit ---

async def _refused(call, kind: str) -> str:
    with pytest.raises(ConversationError) as refused:
        await call
    assert refused.value.kind == kind, str(refused.value)
    return str(refused.value)


async def test_ids_too_long_for_temporal_are_refused_not_retried(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, _):
        cid = await client.start_conversation(f"long-{uuid.uuid4().hex[:6]}")
        reason = await _refused(client.send_message(cid, "hello", message_id="m" * 1100), "invalid")
        assert reason == "the message id is 1100 bytes; the limit is 996 bytes"
        reason = await _refused(client.start_conversation("c" * 1100), "invalid")
        assert reason == "the conversation id is 1100 characters; a conversation is started with one of at most 128"
        assert "c" * 50 not in reason  # sizes, not the id
        # one character over the bound: refused before anything starts (no run to find)
        reason = await _refused(client.start_conversation("d" * 129), "invalid")
        assert reason == "the conversation id is 129 characters; a conversation is started with one of at most 128"
        await _refused(client.state("d" * 129), "not_found")
        # a message to an id too long for Temporal (never started: refused)
        reason = await _refused(client.send_message("c" * 1100, "hello"), "invalid")
        assert reason == "the conversation id is 1100 bytes; the limit is 992 bytes"
        await _refused(client.refund(""), "not_found")
        await _refused(client.refund("r" * 1200), "not_found")
        await _refused(client.decide_approval(f"support-{'x' * 1000}~{'0' * 12}", "approve", "sup-1"), "not_found")
        # a message id that fits is served
        assert (await client.send_message(cid, "hello", message_id="m" * 996)).turn == 1


async def test_a_long_conversation_ids_approval_can_be_decided(temporal_env, settings):
    async with running_worker(temporal_env, settings, approvals=ApprovalPolicy()) as (client, backend):
        cid = await client.start_conversation(f"{uuid.uuid4().hex}-{'l' * 95}")  # 128, the longest taken
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        shown = await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        assert shown.awaiting_confirmation
        told = await client.send_message(cid, "yes")
        assert told.awaiting_approval
        decided = await client.decide_approval(told.awaiting_approval, "approve", "sup-" + "a" * 120)
        assert decided.status is ApprovalStatus.APPROVED
        again = await client.decide_approval(told.awaiting_approval, "approve", "sup-" + "a" * 120)
        assert again == decided  # the same decision again: the same update id, the first answer
        await until(lambda: _cancelled(backend), "the approved write")
        assert len(backend.ledger_entries("main")) == 1


async def _cancelled(backend) -> bool:
    return order_details(backend, PENDING)["status"] == "cancelled"


# --- Conversation ids that start with support- ---

async def test_a_conversation_named_support_something_is_the_one_operators_reach(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        plain = f"px-{uuid.uuid4().hex[:6]}"
        named = f"support-{plain}"
        await client.start_conversation(plain)
        await client.start_conversation(named)
        # both exist: the id as given is a conversation's id, so it is that conversation
        assert await conversation_named(temporal_env.client, named) == named
        assert await conversation_named(temporal_env.client, plain) == plain
        # the workflow id of a conversation whose id has no such twin still reaches it
        assert await conversation_named(temporal_env.client, f"support-{named}") == named
        alone = f"py-{uuid.uuid4().hex[:6]}"
        await client.start_conversation(alone)
        assert await conversation_named(temporal_env.client, f"support-{alone}") == alone
        assert await conversation_named(temporal_env.client, "support-nothing-here") == "nothing-here"
        systems = Systems(backend=backend)
        try:
            report = await check(temporal_env.client, named, systems)
        finally:
            systems.close()
        assert (report.conversation_id, report.workflow_id) == (named, f"support-{named}")


# --- Order ids in the wrong shape ---

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
BENCH_DIR = Path(os.environ.get("TAUBENCH_RETAIL_DIR", ROOT.parent / "shared" / "taubench-retail"))
TRAIN = BENCH_DIR / "tasks_train.json"
NOT_FOUND = "Error: order not found"


def mangled(order_id: str) -> list[str]:
    """Shapes users type: digits only, '#' and digits, and a near miss of the right shape."""
    digits = order_id.lstrip("#W")
    return [digits, f"#{digits}", f"W{digits}"]


async def test_wrong_shapes_and_foreign_orders_answer_not_found_then_the_right_one_works(temporal_env, settings):
    foreign_order, _ = other_customer_order()
    lookups = [*mangled(PENDING), foreign_order, PENDING]

    def brain(view: dict, plan: Optional[dict] = None) -> dict:
        if view["customer"] is None:
            return {"kind": "tool_call", "tool": {"name": "find_user_id_by_email", "arguments": {"email": EMAIL}}}
        seen = {o["arguments"].get("order_id") for o in view["observations"] if o["tool"] == "get_order_details"}
        seen |= set(view["orders"])  # a read that succeeded is folded into the orders, not kept raw
        for order_id in lookups:
            if order_id not in seen:
                return {"kind": "tool_call", "tool": {"name": "get_order_details",
                                                      "arguments": {"order_id": order_id}}}
        if not view["completed_operations"]:
            return {"kind": "tool_call", "tool": {"name": "cancel_pending_order",
                                                  "arguments": {"order_id": PENDING, "reason": "no longer needed"}}}
        return {"kind": "reply", "text": "Your order is cancelled."}

    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = await client.start_conversation("order-id-shapes")
        reply = await client.send_message(cid, f"Hi, my email is {EMAIL}, please cancel my order 4566809")
        assert reply.awaiting_confirmation and PENDING in reply.awaiting_confirmation
        reply = await client.send_message(cid, "yes")
        state = await client.state(cid)
    answers = {o.arguments["order_id"]: o.result for o in state.observations if o.tool == "get_order_details"}
    for wrong in [*mangled(PENDING), foreign_order]:
        assert answers[wrong] == NOT_FOUND  # the same answer whether it is missing or someone else's
    assert PENDING not in answers  # folded into the typed order, so not kept as a raw result too
    assert not [r for r in state.rejections if r.rule == "malformed-model-output"]
    assert list(state.orders) == [PENDING]
    [op] = state.completed_operations
    assert op.ok and json.loads(backend.read("main", "get_order_details", {"order_id": PENDING}))["status"] == \
        "cancelled"


def _with_mangled_lookups(task: Task, foreign: dict[str, str]) -> Task:
    """The task with lookups of wrongly shaped ids (and another customer's order) before
    its first order write; reads change nothing, so the expected data hash is the same."""
    actions: list[dict[str, Any]] = []
    inserted = False
    for action in task.actions:
        order_id = action.get("kwargs", {}).get("order_id")
        if not inserted and order_id and CATALOGUE.get(action["name"]) and CATALOGUE[action["name"]].is_write:
            other = next(o for u, o in foreign.items() if u != task.user_id)
            actions += [{"name": "get_order_details", "kwargs": {"order_id": wrong}}
                        for wrong in [*mangled(order_id), other]]
            inserted = True
        actions.append(action)
    return task.model_copy(update={"actions": actions})


async def test_training_tasks_with_mangled_order_ids_reach_their_expected_data(temporal_env, settings):
    """Training tasks whose first order write is preceded by lookups of mangled ids and of
    another customer's order: each still reaches the benchmark's expected data."""
    tasks = load_tasks(TRAIN)
    orders = json.loads((TRAIN.parent / "orders.json").read_text())
    foreign = {}
    for order_id, order in orders.items():
        foreign.setdefault(order["user_id"], order_id)
    chosen = [t for t in tasks if any(a.get("kwargs", {}).get("order_id") for a in t.actions
                                      if a["name"] in CATALOGUE and CATALOGUE[a["name"]].is_write)][:12]
    assert len(chosen) == 12
    variants = [_with_mangled_lookups(t, foreign) for t in chosen]
    assert all(len(v.actions) == len(t.actions) + 4 for v, t in zip(variants, chosen))
    async with running_worker(temporal_env, settings) as (client, backend):
        report = await TauBenchRunner(client, backend, run_id="mangled").run(variants, concurrency=4)
    failures = [(t.task_index, t.reason) for t in report.tasks if not t.passed]
    assert failures == [] and report.summary.duplicate_writes == 0
