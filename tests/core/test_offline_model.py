"""The offline stand-in model (``systems/model``), pure:

- its brains: ``scripted_brain`` (benchmark runs, following a plan) and ``rules_brain``
  (interactive chat), as pure functions of the state view built from real τ-bench data (and
  of the plan);
- the stand-in as a system of its own: its own copies of what it knows agree with the process,
  and it reads the view the prompt renders (that it imports nothing of ours is an import
  contract of tests/core/test_code_layout.py);
- its prompt cache follows the provider's caching rules: hits and misses by exact prefix, a
  5-minute lifetime refreshed by hits, at most 4 breakpoints (a 400 otherwise), no caching
  below the minimum length, lookback over appended blocks, and usage that adds up.

Its plan book on real databases is tests/activities/test_plan_book.py.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

import anthropic
import pytest

from activities.llm.model_activity import offline_client
from activities.llm.wire import PROPOSE_TOOL_NAME
from systems.model import view as model_view, wire as model_wire
from systems.model.cache import CacheRuleError, PromptCache, tokens_of
from systems.model.rules import CAPABILITIES, STATUS_PREFIX, rules_brain
from systems.model.scripted import scripted_brain
from systems.model.server import offline_brain
from workflows.domain import prompt
from workflows.domain.actions import parse_proposed_action
from workflows.domain.catalogue import TOOL_CLASS, ToolClass
from workflows.domain.catalogue.checks import CANCEL_REASONS
from workflows.domain.policy.validator import Rule
from workflows.domain.prompt import state_view
from workflows.domain.state import (
    CompletedOperation, ConversationState, Customer, Observation, OrderFact, OrderItem, PaymentEntry,
    PaymentMethod, PendingConfirmation, PinnedFact, ProductFact, Rejection, Role, Step, StepStatus, Turn,
    Variant,
)


DATA = Path(__file__).resolve().parents[2] / "systems" / "retail" / "data"

# raj_sanchez_2970: one pending order, two delivered, a credit card and a gift card
RAJ = "raj_sanchez_2970"
RAJ_EMAIL = "raj.sanchez2046@example.com"
PENDING = "#W4566809"
DELIVERED = "#W7736708"
CARD = "credit_card_3362387"
GIFT = "gift_card_2259499"


@lru_cache
def data() -> dict[str, Any]:
    return {name: json.loads((DATA / f"{name}.json").read_text()) for name in ("users", "orders", "products")}


@lru_cache
def dev_tasks() -> list[dict[str, Any]]:
    return json.loads((DATA / "tasks_dev.json").read_text())


# --- state builders (the shapes of workflows.domain.state, filled from the benchmark data) ------


def customer(user_id: str, loaded: bool = True) -> Customer:
    user = data()["users"][user_id]
    cust = Customer(user_id=user_id, authenticated_via="email", authenticated_turn=1, email=user["email"])
    if loaded:
        cust.first_name, cust.last_name = user["name"]["first_name"], user["name"]["last_name"]
        cust.zip = user["address"]["zip"]
        cust.payment_methods = {
            pid: PaymentMethod(id=pid, source=m["source"], balance=m.get("balance")) for pid, m in user["payment_methods"].items()
        }
        cust.order_ids = list(user["orders"])
        cust.details_loaded = True
    return cust


def order_fact(order_id: str, turn: int = 1) -> OrderFact:
    order = data()["orders"][order_id]
    history = [PaymentEntry(transaction_type=p["transaction_type"], amount=p["amount"],
                            payment_method_id=p["payment_method_id"]) for p in order["payment_history"]]
    items = [OrderItem(item_id=i["item_id"], product_id=i["product_id"], name=i["name"], price=i["price"],
                       options=i["options"]) for i in order["items"]]
    return OrderFact(order_id=order_id, user_id=order["user_id"], status=order["status"], items=items,
                     payment_history=history,
                     payment_method_ids=[p.payment_method_id for p in history if p.transaction_type == "payment"],
                     total=round(sum(i.price for i in items), 2), read_turn=turn)


def product_fact(product_id: str) -> ProductFact:
    product = data()["products"][product_id]
    return ProductFact(product_id=product_id, name=product["name"], variants={
        vid: Variant(item_id=vid, options=v["options"], available=v["available"], price=v["price"])
        for vid, v in product["variants"].items()})


def fact(kind: str, value: str, turn: int = 1) -> PinnedFact:
    return PinnedFact(kind=kind, value=value, verbatim=value, turn=turn)


def plan_of(task: dict[str, Any]) -> dict[str, Any]:
    """The plan the τ-bench runner registers for a task (``starter.ops.taubench.plan_of``)."""
    user = data()["users"][task["user_id"]]
    return {"user": {"email": user["email"], "first_name": user["name"]["first_name"],
                     "last_name": user["name"]["last_name"], "zip": user["address"]["zip"]},
            "actions": task["actions"]}


def user_turn(turn: int, text: str) -> Turn:
    return Turn(turn=turn, role=Role.USER, text=text)


def observe(state: ConversationState, tool: str, args: dict[str, Any], result: str) -> None:
    state.observations.append(Observation(tool=tool, arguments=args, result=result, turn=state.turn))


def complete(state: ConversationState, tool: str, args: dict[str, Any], ok: bool = True,
             result: Optional[str] = None) -> None:
    n = len(state.completed_operations)
    state.completed_operations.append(CompletedOperation(
        operation_id=f"op-{n}", idempotency_key=f"key-{n}", tool=tool, arguments=args,
        result=result or json.dumps({"status": "done"}), ok=ok, turn=state.turn))


def propose(brain, state: ConversationState, plan: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """Run a brain on the view and plan as they travel (JSON) and check the output is a
    valid ProposedAction, or a list of tool calls (reads proposed together)."""
    view = json.loads(json.dumps(state_view(state)))
    raw = brain(view, json.loads(json.dumps(plan)) if plan is not None else None)
    if isinstance(raw, list):  # reads proposed together
        assert len(raw) >= 2 and all(parse_proposed_action(action).kind == "tool_call" for action in raw)
    else:
        parse_proposed_action(raw)
    return raw


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"kind": "tool_call", "tool": {"name": name, "arguments": arguments}}


# --- scripted brain ---------------------------------------------------------------------


def scripted_state(task_index: int) -> ConversationState:
    task = dev_tasks()[task_index]
    user = data()["users"][task["user_id"]]
    return ConversationState(
        conversation_id=f"tb-{task_index}", turn=1,
        pinned_facts=[fact("email", user["email"])],
        recent_turns=[user_turn(1, f"Hi, my email is {user['email']}. I need some help with my orders.")],
    )


def scripted(task_index: int, state: ConversationState) -> dict[str, Any]:
    """The scripted brain's next action for dev task ``task_index`` on ``state``."""
    return propose(scripted_brain, state, plan_of(dev_tasks()[task_index]))


def test_scripted_walks_an_exchange_task():
    # dev task 1: omar_lopez_3107 exchanges two items of delivered order #W7273336
    task = dev_tasks()[1]
    (gt,) = task["actions"]
    user_id, order_id = task["user_id"], gt["kwargs"]["order_id"]
    email = data()["users"][user_id]["email"]
    state = scripted_state(1)

    assert scripted(1, state) == call("find_user_id_by_email", email=email)
    observe(state, "find_user_id_by_email", {"email": email}, user_id)
    state.customer = customer(user_id, loaded=False)

    assert scripted(1, state) == call("get_user_details", user_id=user_id)
    state.customer = customer(user_id)

    assert scripted(1, state) == call("get_order_details", order_id=order_id)
    state.orders[order_id] = order_fact(order_id)

    # the new items' products are those of the old items, in item_ids order, read together
    by_item = {i.item_id: i.product_id for i in state.orders[order_id].items}
    expected_products = list(dict.fromkeys(by_item[item] for item in gt["kwargs"]["item_ids"]))
    assert len(expected_products) == 2
    assert scripted(1, state) == [call("get_product_details", product_id=p) for p in expected_products]
    for product_id in expected_products:
        state.products[product_id] = product_fact(product_id)

    assert scripted(1, state) == {"kind": "tool_call", "tool": {"name": gt["name"], "arguments": gt["kwargs"]}}

    state.turn = 2  # the user said yes; the write ran
    state.recent_turns.append(user_turn(2, "yes"))
    complete(state, gt["name"], gt["kwargs"])
    end = scripted(1, state)
    assert end["kind"] == "end"
    assert f"exchange_delivered_order_items {order_id}: ok" in end["text"]


def test_scripted_next_action_survives_an_empty_observation_window():
    # dev task 12: six writes on three orders; after two, only completed operations remain
    task = dev_tasks()[12]
    state = scripted_state(12)
    state.customer = customer(task["user_id"])
    first, second, third = task["actions"][:3]
    state.orders[first["kwargs"]["order_id"]] = order_fact(first["kwargs"]["order_id"])
    complete(state, first["name"], first["kwargs"])
    complete(state, second["name"], second["kwargs"])
    assert not state.observations
    assert scripted(12, state) == call("get_order_details", order_id=third["kwargs"]["order_id"])
    state.orders[third["kwargs"]["order_id"]] = order_fact(third["kwargs"]["order_id"])
    assert scripted(12, state)["tool"] == {"name": third["name"], "arguments": third["kwargs"]}


def test_scripted_counts_a_rejected_write_as_handled():
    state = scripted_state(0)
    task = dev_tasks()[0]
    (gt,) = task["actions"]
    state.customer = customer(task["user_id"])
    state.orders[gt["kwargs"]["order_id"]] = order_fact(gt["kwargs"]["order_id"])
    assert scripted(0, state)["tool"]["name"] == "cancel_pending_order"
    state.rejections.append(Rejection(turn=1, rule="cancel-pending-only", reason="not pending",
                                      proposal={"kind": "tool_call", "tool": {"name": gt["name"], "arguments": gt["kwargs"]}}))
    assert scripted(0, state)["kind"] == "end"


def test_scripted_counts_a_failed_write_once():
    # a tool error is recorded as a failed operation and as a tool-error rejection
    write = {"name": "cancel_pending_order", "kwargs": {"order_id": PENDING, "reason": "no longer needed"}}
    plan = {"user": {"email": RAJ_EMAIL}, "actions": [write, write]}
    state = ConversationState(conversation_id="c", turn=2, customer=customer(RAJ),
                              orders={PENDING: order_fact(PENDING)})
    complete(state, write["name"], write["kwargs"], ok=False, result="Error: non-pending order cannot be cancelled")
    state.rejections.append(Rejection(turn=2, rule="tool-error", reason="Error: ...",
                                      proposal=call(write["name"], **write["kwargs"])))
    assert propose(scripted_brain, state, plan) == call(write["name"], **write["kwargs"])  # the second is still due


def test_scripted_lookup_falls_back_to_name_zip_then_asks():
    task = dev_tasks()[0]
    user = data()["users"][task["user_id"]]
    state = scripted_state(0)
    observe(state, "find_user_id_by_email", {"email": user["email"]}, "Error: user not found")
    assert scripted(0, state) == call(
        "find_user_id_by_name_zip", first_name=user["name"]["first_name"], last_name=user["name"]["last_name"],
        zip=user["address"]["zip"])
    observe(state, "find_user_id_by_name_zip", {"first_name": user["name"]["first_name"],
                                                "last_name": user["name"]["last_name"],
                                                "zip": user["address"]["zip"]}, "Error: user not found")
    assert scripted(0, state)["kind"] == "reply"


def test_scripted_uses_the_plans_own_lookup_first():
    plan = {"user": {"email": RAJ_EMAIL},
            "actions": [{"name": "find_user_id_by_name_zip",
                         "kwargs": {"first_name": "Raj", "last_name": "Sanchez", "zip": "92147"}}]}
    state = ConversationState(conversation_id="c", turn=1)
    assert propose(scripted_brain, state, plan) == call("find_user_id_by_name_zip", first_name="Raj",
                                                        last_name="Sanchez", zip="92147")
    state.customer = customer(RAJ)
    assert propose(scripted_brain, state, plan)["kind"] == "end"  # the lookup is handled by authentication


def test_scripted_reads_think_calculate_transfer_and_closing_figures():
    plan = {"user": {"email": RAJ_EMAIL}, "actions": [
        {"name": "think", "kwargs": {"thought": "hmm"}},
        {"name": "calculate", "kwargs": {"expression": "1093.34 - 30"}},
        {"name": "transfer_to_human_agents", "kwargs": {"summary": "wants a discount"}},
    ]}
    state = ConversationState(conversation_id="c", turn=1, customer=customer(RAJ))
    assert propose(scripted_brain, state, plan) == call("calculate", expression="1093.34 - 30")
    observe(state, "calculate", {"expression": "1093.34 - 30"}, "1063.34")
    assert propose(scripted_brain, state, plan) == {"kind": "transfer_to_human", "summary": "wants a discount"}
    state.rejections.append(Rejection(turn=1, rule="transfer", reason="no",
                                      proposal={"kind": "transfer_to_human", "summary": "wants a discount"}))
    end = propose(scripted_brain, state, plan)
    assert end["kind"] == "end" and "1093.34 - 30 = 1063.34" in end["text"]


def test_scripted_does_not_loop_on_a_failed_prerequisite_read():
    state = scripted_state(0)
    task = dev_tasks()[0]
    (gt,) = task["actions"]
    state.customer = customer(task["user_id"])
    observe(state, "get_order_details", {"order_id": gt["kwargs"]["order_id"]}, "Error: order not found")
    assert scripted(0, state) == call(gt["name"], **gt["kwargs"])  # the workflow decides


def test_scripted_asks_for_the_yes_when_its_write_is_pending():
    state = scripted_state(0)
    task = dev_tasks()[0]
    (gt,) = task["actions"]
    state.customer = customer(task["user_id"])
    state.orders[gt["kwargs"]["order_id"]] = order_fact(gt["kwargs"]["order_id"])
    from workflows.domain.actions import make_tool_call
    pending_call = make_tool_call(gt["name"], gt["kwargs"])
    state.pending_confirmation = PendingConfirmation(operation_id="op", call=pending_call, detail="cancel it",
                                                     digest="d", proposed_turn=1)
    action = scripted(0, state)
    assert action["kind"] == "reply" and "cancel it" in action["text"]


def test_offline_brain_dispatches_on_the_plan():
    state, task = scripted_state(0), dev_tasks()[0]
    state.customer = customer(task["user_id"])
    plan = plan_of(task)
    assert propose(offline_brain, state, plan) == propose(scripted_brain, state, plan)
    order_id = task["actions"][0]["kwargs"]["order_id"]
    assert propose(offline_brain, state, plan) == call("get_order_details", order_id=order_id)
    # the same view without a plan: the chat rules, which have no request to act on
    assert propose(offline_brain, state) == propose(rules_brain, state)
    assert propose(offline_brain, state)["kind"] == "reply"


def test_scripted_brain_needs_a_plan_of_the_right_shape():
    view = state_view(ConversationState(conversation_id="c"))
    for plan in (None, {"actions": "cancel everything"}, {"actions": [{"kwargs": {}}]}, ["x"]):
        with pytest.raises(ValueError):
            scripted_brain(view, plan)


# --- the dev suite end to end through the workflow's own policy and transitions ------------


class Simulator:
    """SupportWorkflow's loop, in-process and without Temporal: brain -> the workflow's
    own policy -> the benchmark tools on a private copy of the data -> the workflow's own
    transitions. A write waits for the next user message; "yes" runs it."""

    def __init__(self, conversation_id: str, plan: Optional[dict[str, Any]] = None) -> None:
        self.plan = plan  # what the offline model's PlanBook holds for this conversation
        self.db = copy.deepcopy(data())
        self.state = ConversationState(conversation_id=conversation_id)
        self.pending: Optional[PendingConfirmation] = None
        self.proposed: list[dict[str, Any]] = []
        self.calls = 0
        """Model calls made."""

    def say(self, text: str) -> str:
        """One user message; returns the assistant's reply (or end text)."""
        from workflows.domain import transitions as tr
        from workflows.domain.policy.confirm import is_yes
        from workflows.domain.policy.validator import validate_execution
        from workflows.domain.state import Confirmation

        tr.receive_user_message(self.state, text)
        pending, self.pending = self.pending, None
        if pending is not None and is_yes(text):
            confirmation = Confirmation(operation_id=pending.operation_id, digest=pending.digest, turn=self.state.turn,
                                            verbatim=text)
            assert validate_execution(self.state, pending, confirmation).accepted
            self._write(pending)
            # the workflow words a write's outcome itself: no model call
            from workflows.domain.replies import write_outcome
            op = self.state.completed_operations[-1]
            order = self.state.orders.get(op.arguments.get("order_id", ""))
            return write_outcome(pending.detail, None if op.ok else op.result, op.arguments.get("order_id"),
                                 order.status if order else None)
        elif pending is not None:
            tr.reject(self.state, "user-declined", "the user declined", _proposal(pending.call))
        return self._agent_loop()

    def _agent_loop(self) -> str:
        from systems.retail.tools import run_tool
        from workflows.domain import transitions as tr
        from workflows.domain.actions import call_arguments, call_digest
        from workflows.domain.catalogue import spec_of
        from workflows.domain.policy.validator import validate_proposal

        from workflows.conversation.state_reads import next_due_read

        for step in range(30):
            while (due := next_due_read(self.state)) is not None:  # state-driven reads, before the model
                tr.apply_read_result(self.state, due, run_tool(self.db, due.name, call_arguments(due)))
            raw = propose(offline_brain, self.state, self.plan)
            self.proposed.append(raw)
            self.calls += 1
            if isinstance(raw, list):  # reads proposed together: each judged, each run
                for one in raw:
                    read = parse_proposed_action(one)
                    if validate_proposal(self.state, read).accepted:
                        tr.apply_read_result(self.state, read.tool, run_tool(self.db, read.tool.name,
                                                                             call_arguments(read.tool)))
                continue
            action = parse_proposed_action(raw)
            verdict = validate_proposal(self.state, action)
            if not verdict.accepted:
                tr.reject(self.state, verdict.rule.value, verdict.reason, action.model_dump(mode="json"))
                continue
            if action.kind != "tool_call":
                return raw.get("text") or raw.get("summary", "")
            tool = action.tool
            if not spec_of(tool.name).is_write:
                tr.apply_read_result(self.state, tool, run_tool(self.db, tool.name, call_arguments(tool)))
                continue
            self.pending = PendingConfirmation(operation_id=f"op-{len(self.proposed)}", call=tool, detail=tool.name,
                                               digest=call_digest(tool), proposed_turn=self.state.turn)
            return f"Please confirm {tool.name}"
        raise AssertionError("the brain did not settle within 30 steps of one turn")

    def _write(self, pending: PendingConfirmation) -> None:
        from systems.retail.tools import run_tool
        from workflows.domain import transitions as tr
        from workflows.domain.actions import call_arguments, make_tool_call
        from workflows.domain.catalogue import REFUND_TOOLS

        tool, state = pending.call, self.state
        result = run_tool(self.db, tool.name, call_arguments(tool))
        ok = not result.startswith("Error")
        tr.apply_write_result(state, tool, pending.operation_id, f"key-{pending.operation_id}", result, ok)
        if ok and tool.name in REFUND_TOOLS and state.customer is not None:
            refresh = make_tool_call("get_user_details", {"user_id": state.customer.user_id})
            tr.apply_read_result(state, refresh, run_tool(self.db, refresh.name, call_arguments(refresh)))


def _proposal(tool: Any) -> dict[str, Any]:
    return {"kind": "tool_call", "tool": tool.model_dump(mode="json")}


def drive(task: dict[str, Any]) -> Simulator:
    """A benchmark run: the task's plan is registered for the conversation, the user opens
    with their email and a plain request, then says yes until the end."""
    sim = Simulator(f"tb-{task['task_index']}", plan_of(task))
    user = sim.db["users"][task["user_id"]]
    sim.say(f"Hi, my email is {user['email']}. I need some help with my orders.")
    for _ in range(20):
        if sim.proposed[-1]["kind"] in ("end", "transfer_to_human"):
            return sim
        sim.say("yes")
    raise AssertionError(f"task {task['task_index']} did not end")


@pytest.mark.parametrize("task_index", range(20))
def test_scripted_brain_solves_dev_task(task_index):
    from systems.retail.hashing import data_hash

    task = dev_tasks()[task_index]
    sim = drive(task)
    assert sim.proposed[-1]["kind"] == "end"
    assert sim.state.rejections == []
    assert data_hash(sim.db) == task["gt_data_hash"]
    assert [op.tool for op in sim.state.completed_operations] == [a["name"] for a in task["actions"]]


# --- rules brain --------------------------------------------------------------------------


def chat(*user_texts: str, facts_: tuple[PinnedFact, ...] = (), **fields: Any) -> ConversationState:
    turns = [user_turn(i + 1, text) for i, text in enumerate(user_texts)]
    return ConversationState(conversation_id="chat", turn=len(user_texts), recent_turns=turns,
                             pinned_facts=list(facts_), **fields)


def test_rules_authenticates_by_email_then_loads_details():
    state = chat(f"hi, my email is {RAJ_EMAIL}", facts_=(fact("email", RAJ_EMAIL),))
    assert propose(rules_brain, state) == call("find_user_id_by_email", email=RAJ_EMAIL)
    state.customer = customer(RAJ, loaded=False)
    assert propose(rules_brain, state) == call("get_user_details", user_id=RAJ)


def test_rules_authenticates_by_name_and_zip():
    state = chat("I'm Raj Sanchez, zip 92147", facts_=(fact("name", "Raj Sanchez"), fact("zip", "92147")))
    assert propose(rules_brain, state) == call("find_user_id_by_name_zip", first_name="Raj", last_name="Sanchez",
                                               zip="92147")


def test_rules_asks_for_identity():
    action = propose(rules_brain, chat("I want to cancel something"))
    assert action["kind"] == "reply" and "email" in action["text"]


def test_rules_reports_a_failed_lookup_instead_of_retrying():
    state = chat("me@nowhere.com", facts_=(fact("email", "me@nowhere.com"),))
    observe(state, "find_user_id_by_email", {"email": "me@nowhere.com"}, "Error: user not found")
    action = propose(rules_brain, state)
    assert action["kind"] == "reply" and "user not found" in action["text"]


def test_rules_quotes_a_failed_read_without_the_tools_error_prefix():
    """"I could not find order #W1234567: order not found", not "...: Error: order not found"."""
    state = chat("What is the status of order #W1234567?", facts_=(fact("order_id", "#W1234567"),),
                 customer=customer(RAJ))
    observe(state, "get_order_details", {"order_id": "#W1234567"}, "Error: order not found")
    action = propose(rules_brain, state)
    assert action == {"kind": "reply", "text": "I could not find order #W1234567: order not found"}
    lookup = chat("me@nowhere.com", facts_=(fact("email", "me@nowhere.com"),))
    observe(lookup, "find_user_id_by_email", {"email": "me@nowhere.com"}, "Error: user not found")
    assert "(user not found)" in propose(rules_brain, lookup)["text"]


def test_rules_cancel_flow():
    state = chat(f"Please cancel order {PENDING}, I ordered it by mistake. {RAJ_EMAIL}",
                 facts_=(fact("order_id", PENDING), fact("email", RAJ_EMAIL)), customer=customer(RAJ))
    assert propose(rules_brain, state) == call("get_order_details", order_id=PENDING)
    state.orders[PENDING] = order_fact(PENDING)
    assert propose(rules_brain, state) == call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake")
    # the user confirmed at turn 2 and the write completed
    state.turn = 2
    state.recent_turns.append(user_turn(2, "yes"))
    complete(state, "cancel_pending_order", {"order_id": PENDING, "reason": "ordered by mistake"},
             result=json.dumps({"order_id": PENDING, "status": "cancelled"}))
    done = propose(rules_brain, state)
    assert done["kind"] == "reply" and "cancelled" in done["text"] and PENDING in done["text"]
    state.turn = 3
    state.recent_turns.append(user_turn(3, "thanks, bye"))
    assert propose(rules_brain, state)["kind"] == "end"


def test_rules_cancel_intent_from_before_authentication():
    state = chat(f"I want to cancel {PENDING}", f"my email is {RAJ_EMAIL}",
                 facts_=(fact("order_id", PENDING, 1), fact("email", RAJ_EMAIL, 2)), customer=customer(RAJ),
                 orders={PENDING: order_fact(PENDING)})
    assert propose(rules_brain, state) == call("cancel_pending_order", order_id=PENDING, reason="no longer needed")


def test_rules_return_flow_with_pinned_items_and_default_payment():
    wanted, foreign = data()["orders"][DELIVERED]["items"][1]["item_id"], "1569829406"  # 2nd is from PENDING
    state = chat(f"I'd like to return {wanted} and {foreign} from {DELIVERED}",
                 facts_=(fact("order_id", DELIVERED), fact("item_id", wanted), fact("item_id", foreign)),
                 customer=customer(RAJ), orders={DELIVERED: order_fact(DELIVERED)})
    assert propose(rules_brain, state) == call("return_delivered_order_items", order_id=DELIVERED,
                                               item_ids=[wanted], payment_method_id=CARD)


def test_rules_return_all_items_to_a_pinned_gift_card():
    state = chat(f"return everything in {DELIVERED} to {GIFT}",
                 facts_=(fact("order_id", DELIVERED), fact("payment_method_id", GIFT)),
                 customer=customer(RAJ), orders={DELIVERED: order_fact(DELIVERED)})
    all_items = [i["item_id"] for i in data()["orders"][DELIVERED]["items"]]
    assert propose(rules_brain, state) == call("return_delivered_order_items", order_id=DELIVERED,
                                               item_ids=all_items, payment_method_id=GIFT)


def test_rules_will_not_cancel_a_delivered_order():
    state = chat(f"cancel {DELIVERED}", facts_=(fact("order_id", DELIVERED),), customer=customer(RAJ),
                 orders={DELIVERED: order_fact(DELIVERED)})
    action = propose(rules_brain, state)
    assert action["kind"] == "reply" and "delivered" in action["text"]


def test_rules_replies_with_a_rejection_at_this_turn_instead_of_retrying():
    proposal = call("cancel_pending_order", order_id=PENDING, reason="no longer needed")
    state = chat(f"cancel {PENDING}", facts_=(fact("order_id", PENDING),), customer=customer(RAJ),
                 orders={PENDING: order_fact(PENDING)},
                 rejections=[Rejection(turn=1, rule="cancel-pending-only", reason="the order changed meanwhile",
                                       proposal=proposal)])
    action = propose(rules_brain, state)
    assert action == {"kind": "reply", "text": "I can't do that: the order changed meanwhile"}
    state.turn = 2  # a new turn may try again
    state.recent_turns.append(user_turn(2, "please try cancelling again"))
    assert propose(rules_brain, state) == proposal


def test_rules_acknowledges_a_no():
    proposal = call("cancel_pending_order", order_id=PENDING, reason="no longer needed")
    state = chat(f"cancel {PENDING}", "no", facts_=(fact("order_id", PENDING),), customer=customer(RAJ),
                 orders={PENDING: order_fact(PENDING)},
                 rejections=[Rejection(turn=2, rule="user-declined", reason="the user declined", proposal=proposal)])
    action = propose(rules_brain, state)
    assert action["kind"] == "reply" and "not made that change" in action["text"]


def test_rules_does_not_propose_again_a_write_handed_to_a_human():
    """An approval that ran out of time hands the write to a human agent (its step failed,
    no operation, no rejection): the user's next words ("hello?") do not get the same write
    proposed again, which a yes would park for a supervisor beside the human."""
    state = chat(f"cancel {PENDING}", "yes", "hello?", facts_=(fact("order_id", PENDING),), customer=customer(RAJ),
                 orders={PENDING: order_fact(PENDING)},
                 steps=[Step(step_id="chat.t1", name="cancel_pending_order", status=StepStatus.FAILED, turn=1,
                             error="the approval expired undecided; handed to a human agent")])
    action = propose(rules_brain, state)
    assert action["kind"] == "reply" and action["text"].endswith(CAPABILITIES)
    state.turn = 4  # asked again in so many words: proposed again
    state.recent_turns.append(user_turn(4, f"please cancel {PENDING}"))
    assert propose(rules_brain, state)["tool"]["name"] == "cancel_pending_order"
    # while it waits for a supervisor, "any news?" does not re-propose it either (the policy's
    # reason for the model, "... wait for it before proposing another", would reach the user)
    state.steps.append(Step(step_id="chat.t4", name="cancel_pending_order", status=StepStatus.AWAITING_APPROVAL,
                            turn=4))
    state.turn = 5
    state.recent_turns.append(user_turn(5, "any news?"))
    assert propose(rules_brain, state)["text"].endswith(CAPABILITIES)


def test_rules_status_reply():
    state = chat(f"where is my order {PENDING}?", facts_=(fact("order_id", PENDING),), customer=customer(RAJ),
                 orders={PENDING: order_fact(PENDING)})
    action = propose(rules_brain, state)
    assert action["kind"] == "reply"
    assert action["text"].startswith(f"{STATUS_PREFIX} {PENDING}: pending")
    assert "Indoor Security Camera" in action["text"]


def test_rules_unknown_request_lists_capabilities():
    state = chat("can you change my shipping address?", customer=customer(RAJ))
    action = propose(rules_brain, state)
    assert action["kind"] == "reply" and action["text"].endswith(CAPABILITIES)
    # acknowledging the identity only on the turn it was verified
    assert ("verified your identity" in action["text"]) == (state.customer.authenticated_turn == state.turn)


def test_rules_refuses_another_customers_order():
    other = next(oid for oid, o in data()["orders"].items() if o["user_id"] != RAJ)
    state = chat(f"cancel {other}", facts_=(fact("order_id", other),), customer=customer(RAJ),
                 orders={other: order_fact(other)})
    action = propose(rules_brain, state)
    assert action["kind"] == "reply" and "not on your account" in action["text"]


def test_rules_chat_end_to_end_through_the_workflow_policy():
    sim = Simulator("chat-e2e")
    first = sim.say(f"Hi, I ordered {PENDING} by mistake and want to cancel it. My email is {RAJ_EMAIL}.")
    assert first == "Please confirm cancel_pending_order"
    assert sim.pending.call.arguments.model_dump() == {"order_id": PENDING, "reason": "ordered by mistake"}
    done = sim.say("yes")
    assert "cancelled" in done and sim.db["orders"][PENDING]["status"] == "cancelled"
    status = sim.say(f"and where is {DELIVERED}?")
    assert status.startswith(f"{STATUS_PREFIX} {DELIVERED}: delivered")
    assert sim.say("please return the notebook").startswith("Please confirm return_delivered_order_items")
    notebook = next(i["item_id"] for i in data()["orders"][DELIVERED]["items"] if i["name"] == "Notebook")
    assert sim.pending.call.arguments.item_ids == [notebook]
    assert sim.pending.call.arguments.payment_method_id == CARD
    assert sim.say("no").startswith("Understood")
    sim.say("bye")
    assert sim.proposed[-1]["kind"] == "end"
    assert sim.state.rejections[-1].rule == "user-declined"
    assert [r.rule for r in sim.state.rejections] == ["user-declined"]  # the policy refused nothing


def test_rules_tell_a_refusal_without_clause_ids_or_tool_names():
    # the stand-in does not quote the policy's reason word for word: no clause id such as
    # "(cancel-pending-only)" and no tool name such as "modify_pending_order_items" reaches the user
    from systems.model.rules import plain

    proposal = call("cancel_pending_order", order_id=PENDING, reason="no longer needed")
    state = chat(f"cancel {PENDING}", facts_=(fact("order_id", PENDING),), customer=customer(RAJ),
                 orders={PENDING: order_fact(PENDING)},
                 rejections=[Rejection(turn=1, rule="item-change-once", proposal=proposal,
                                       reason=f"modify_pending_order_items was already done once for order {PENDING} "
                                              "(item-change-once)")])
    assert propose(rules_brain, state) == {
        "kind": "reply", "text": f"I can't do that: modify pending order items was already done once for order {PENDING}"}
    assert plain("credit_card_3362387 is not one of gift_card_1's (one-customer)") == \
        "credit_card_3362387 is not one of gift_card_1's"


# --- The stand-in as a system of its own ---

# --- the stand-in's own knowledge agrees with the process it serves ----------------------


def test_the_stand_ins_knowledge_matches_the_process():
    assert (model_view.STATE_OPEN_TAG, model_view.STATE_CLOSE_TAG) == (prompt.STATE_OPEN_TAG, prompt.STATE_CLOSE_TAG)
    # the stand-in knows the benchmark's reads; a tool added to the catalogue later is one
    # it never proposes, but every tool it treats as a read must be a read
    assert model_view.READ_TOOLS <= {name for name, cls in TOOL_CLASS.items() if cls is ToolClass.READ}
    assert {"get_order_details", "get_user_details", "get_product_details"} <= model_view.READ_TOOLS
    assert model_view.CANCEL_REASONS == CANCEL_REASONS
    assert model_view.RULE_MALFORMED_OUTPUT == Rule.MALFORMED_OUTPUT.value
    assert model_view.RULE_USER_DECLINED == Rule.USER_DECLINED.value
    assert model_view.TRANSFER_TOOL not in TOOL_CLASS  # transfer is its own kind of action
    assert model_view.SERVED_STEPS == {s.value for s in StepStatus} - {"pending", "running"}
    assert model_wire.DEFAULT_TOOL_NAME == PROPOSE_TOOL_NAME


def test_the_stand_in_reads_the_view_the_prompt_renders():
    state = ConversationState(conversation_id="c", turn=1,
                              pinned_facts=[PinnedFact(kind="email", value="a@b.co", verbatim="a@b.co", turn=1)],
                              recent_turns=[Turn(turn=1, role=Role.USER, text="a@b.co </state_json> hi")])
    content = prompt.render_snapshot(state).text()
    # the lean layout's blocks and turn lines, merged (its empty keys read back empty): the whole view
    view = json.loads(json.dumps(prompt.state_view(state)))
    assert model_view.parse_state_view(content) == view
    cached = prompt.render_request(prompt.state_view(state), prompt.LAST_CACHED_VERSION).text()
    assert model_view.parse_state_view(cached) == view
    legacy = prompt.render_request(prompt.state_view(state), prompt.SINGLE_LAYOUT_VERSION).text()
    assert model_view.parse_state_view(legacy) == view
    with pytest.raises(ValueError):
        model_view.parse_state_view("no state here")


# --- The stand-in's prompt cache ---

EPHEMERAL = {"type": "ephemeral"}
SYSTEM = "s" * 8000  # 2,000 tokens: above the 1,024-token minimum


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def body(*user_blocks: str, marks: tuple[int, ...] = (), system_mark: bool = True, system: str = SYSTEM) -> dict:
    content = [{"type": "text", "text": text, **({"cache_control": EPHEMERAL} if i in marks else {})}
               for i, text in enumerate(user_blocks)]
    return {"model": "m", "max_tokens": 10,
            "system": [{"type": "text", "text": system, **({"cache_control": EPHEMERAL} if system_mark else {})}],
            "messages": [{"role": "user", "content": content}]}


def total(usage: dict) -> int:
    return usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]


def test_first_call_writes_the_next_reads_and_a_changed_prefix_misses():
    cache = PromptCache(clock=Clock())
    first = cache.account(body("stable " * 100, "volatile 1", marks=(0,)))
    assert first["cache_read_input_tokens"] == 0 and first["cache_creation_input_tokens"] > 2000
    second = cache.account(body("stable " * 100, "volatile 2", marks=(0,)))
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert second["cache_creation_input_tokens"] == 0 and second["input_tokens"] == tokens_of(
        len(SYSTEM) + 700 + len("volatile 2")) - second["cache_read_input_tokens"]
    # a changed stable block: the system prefix still hits, the stable block is written again
    third = cache.account(body("changed " * 100, "volatile 3", marks=(0,)))
    assert third["cache_read_input_tokens"] == tokens_of(len(SYSTEM))
    assert third["cache_creation_input_tokens"] == tokens_of(len(SYSTEM) + 800) - tokens_of(len(SYSTEM))
    for usage in (first, second, third):
        assert usage["input_tokens"] > 0


def test_an_entry_expires_five_minutes_after_its_last_use():
    clock = Clock()
    cache = PromptCache(clock=clock)
    cache.account(body("v"))
    clock.now += 299
    assert cache.account(body("v"))["cache_read_input_tokens"] > 0  # a hit refreshes the lifetime
    clock.now += 299
    assert cache.account(body("v"))["cache_read_input_tokens"] > 0
    clock.now += 301
    missed = cache.account(body("v"))
    assert missed["cache_read_input_tokens"] == 0 and missed["cache_creation_input_tokens"] > 0


def test_a_prefix_below_the_minimum_is_not_cached():
    cache = PromptCache(clock=Clock())
    short = body("tiny", system="short system")
    for _ in range(2):
        usage = cache.account(short)
        assert usage["cache_read_input_tokens"] == usage["cache_creation_input_tokens"] == 0
        assert usage["input_tokens"] == total(usage) > 0


def test_an_appended_block_still_hits_the_prefix_written_before_it():
    cache = PromptCache(clock=Clock())
    cache.account(body("a" * 400, marks=(0,)))
    grown = cache.account(body("a" * 400, "b" * 400, marks=(1,)))  # the old breakpoint is gone
    assert grown["cache_read_input_tokens"] == tokens_of(len(SYSTEM) + 400)
    assert grown["cache_creation_input_tokens"] == tokens_of(len(SYSTEM) + 800) - tokens_of(len(SYSTEM) + 400)


def test_more_than_four_breakpoints_is_refused():
    cache = PromptCache(clock=Clock())
    four = body("1", "2", "3", marks=(0, 1, 2))
    assert total(cache.account(four)) > 0
    with pytest.raises(CacheRuleError, match="maximum of 4 blocks with cache_control"):
        cache.account(body("1", "2", "3", "4", marks=(0, 1, 2, 3)))


async def test_the_stand_in_answers_400_to_five_breakpoints_and_reports_cache_usage():
    client = offline_client(10.0)
    content = [{"type": "text", "text": f"block {i}", "cache_control": EPHEMERAL} for i in range(4)]
    content.append({"type": "text", "text": '<state_json>{"turn": 1}</state_json>'})
    request = {"model": "m", "max_tokens": 100, "system": [{"type": "text", "text": SYSTEM, "cache_control": EPHEMERAL}],
               "messages": [{"role": "user", "content": content}]}
    with pytest.raises(anthropic.BadRequestError, match="maximum of 4 blocks with cache_control"):
        await client.messages.create(**request)
    request["messages"][0]["content"] = content[3:]  # one breakpoint in the message: two in all
    first = await client.messages.create(**request)
    second = await client.messages.create(**request)
    assert first.usage.cache_creation_input_tokens > 0 and first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.cache_creation_input_tokens == 0
    counted = await client.messages.count_tokens(model="m", system=request["system"], messages=request["messages"])
    assert counted.input_tokens == (second.usage.input_tokens + second.usage.cache_read_input_tokens
                                    + second.usage.cache_creation_input_tokens)


def test_rules_tries_the_newest_three_emails_and_then_asks():
    emails = [f"nobody{n}@example.com" for n in range(9)]
    state = chat("my emails: " + " ".join(emails), facts_=tuple(fact("email", e) for e in emails))
    for email in reversed(emails[-3:]):
        assert propose(rules_brain, state) == call("find_user_id_by_email", email=email)
        observe(state, "find_user_id_by_email", {"email": email}, "Error: user not found")
    action = propose(rules_brain, state)
    assert action["kind"] == "reply" and "user not found" in action["text"]
