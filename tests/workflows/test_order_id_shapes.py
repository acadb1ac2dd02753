"""An order id in the wrong shape, or another customer's order, reaches the system of
record scoped to the authenticated customer and comes back as "not found" — revealing
nothing — and the conversation goes on to the right order.

The kind: argument models constrain types and sizes; business formats are judged by the
system of record or the policy, with a reason the model can act on. Before, the argument
model's id pattern turned such a lookup into malformed model output and the
conversation stalled.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

from starter.ops.taubench import Task, TauBenchRunner, load_tasks
from tests.policy_fixtures import EMAIL, PENDING, other_customer_order
from tests.workflow_harness import running_worker
from workflows.domain.catalogue import CATALOGUE

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
        report = await TauBenchRunner(client, backend, run_id="mangled").run(variants, concurrency=6)
    failures = [(t.task_index, t.reason) for t in report.tasks if not t.passed]
    assert failures == [] and report.summary.duplicate_writes == 0
