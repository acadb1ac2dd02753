"""The goodwill credit on the pure policy and the system of record's own function: at most
10 % of the order's total and one per order (clause goodwill-credit, with its reason), for a
delivered order, to a gift card of the customer, for a stated reason; the detail the user
confirms; the amount a supervisor approves and operators see; the money the payments service
moves; the store crediting the gift card once."""

from __future__ import annotations

import copy
import json
from decimal import Decimal

import pytest

from activities.payments_port import money_movements
from systems.retail.tools import run_tool
from tests.policy_fixtures import CARD, CUSTOMER, DELIVERED, DELIVERED_2, GIFT, PENDING, authenticated, data
from workflows.domain import transitions as tr
from workflows.domain.actions import ToolCallAction, make_tool_call
from workflows.domain.catalogue import spec_of
from workflows.domain.catalogue.folds import order_fact
from workflows.domain.policy.approvals import ApprovalPolicy, required_approval
from workflows.domain.policy.confirm import describe
from workflows.domain.policy.validator import validate_proposal
from workflows.domain.prompt import render_system
from workflows.domain.replies import refused
from workflows.refund.view import refund_amount

TOOL = "grant_goodwill_credit"
CAP = "98.08"  # 10 % of #W7736708's total of 980.87, rounded down


def credit(amount="50.00", order_id=DELIVERED, reason="late delivery", method=GIFT):
    return make_tool_call(TOOL, {"order_id": order_id, "amount": amount, "reason": reason,
                                 "payment_method_id": method})


def verdict(state, call):
    return validate_proposal(state, ToolCallAction(tool=call))


def test_up_to_ten_percent_of_the_total_is_accepted_and_needs_confirmation():
    state = authenticated()
    accepted = verdict(state, credit(CAP))
    assert accepted.accepted and accepted.needs_confirmation


def test_over_ten_percent_is_refused_with_the_clauses_reason():
    refusal = verdict(authenticated(), credit("98.09"))
    assert not refusal.accepted and refusal.rule.value == "goodwill-credit"
    assert refusal.reason == ("a goodwill credit is at most 10% of the order's total of 980.87: at most 98.08 for "
                              f"order {DELIVERED}, not 98.09")
    other = verdict(authenticated(), credit("120.16", order_id=DELIVERED_2))  # 10 % of 1201.55 is 120.15
    assert not other.accepted and "at most 120.15" in other.reason
    assert verdict(authenticated(), credit("120.15", order_id=DELIVERED_2)).accepted


def test_a_second_credit_for_the_same_order_is_refused():
    state = authenticated()
    call = credit("20.00")
    order = copy.deepcopy(data()["orders"][DELIVERED])
    order["payment_history"].append({"transaction_type": "goodwill_credit", "amount": 20.0, "payment_method_id": GIFT})
    tr.apply_write_result(state, call, "policy-test.t1", "key", json.dumps(order), True, None, None)
    for second in (credit("5.00"), credit("5.00", reason="damaged item")):
        refusal = verdict(state, second)
        assert not refusal.accepted and refusal.rule.value == "goodwill-credit"
        assert refusal.reason == f"order {DELIVERED} already received a goodwill credit; an order gets at most one"
    # the order as read says so too (another conversation's or a backend's credit)
    fresh = authenticated(load_orders=False)
    tr.apply_read_result(fresh, make_tool_call("get_order_details", {"order_id": DELIVERED}), json.dumps(order))
    assert "already received a goodwill credit" in verdict(fresh, credit("5.00")).reason


@pytest.mark.parametrize(("call", "rule", "words"), [
    (credit(order_id=PENDING), "goodwill-credit", "only delivered orders can be given a goodwill credit"),
    (credit(method=CARD), "goodwill-credit", "goes to one of the customer's gift cards"),
    (credit(reason="I am unhappy"), "goodwill-credit", "reason must be one of"),
    (credit(method="gift_card_0000000"), "one-customer", "is not one of the customer's payment methods"),
])
def test_the_clause_and_the_generic_gates_refuse_with_their_reason(call, rule, words):
    refusal = verdict(authenticated(), call)
    assert not refusal.accepted and refusal.rule.value == rule and words in refusal.reason, refusal


def test_an_amount_is_whole_cents_and_positive():
    for bad in ("0", "-1.00", "1.234"):
        with pytest.raises(ValueError):
            credit(bad)


def test_the_user_confirms_the_exact_credit():
    assert describe(authenticated(), credit("25.5")) == (
        f"Credit 25.50 to {GIFT} (gift card (balance 30.00)) as a goodwill gesture for order {DELIVERED} "
        "(reason: late delivery). An order can receive only one goodwill credit.")


def test_the_credit_is_the_amount_approved_and_shown():
    order = order_fact(data()["orders"][DELIVERED])
    low = ApprovalPolicy(threshold=Decimal("50.00"))
    assert required_approval(credit("50.00"), order, low) is None  # exactly the threshold: no approval
    amount, reasons = required_approval(credit("60.00"), order, low)
    assert amount == Decimal("60.00")
    assert reasons == ["[approval-threshold] 60.00 is above the approval threshold of 50.00"]
    assert required_approval(credit(CAP), order, ApprovalPolicy()) is None  # under the default 500.00
    assert refund_amount(credit("60.00"), data()["orders"][DELIVERED]) == Decimal("60.00")


def test_the_model_reads_the_clause_and_a_user_its_sentence():
    assert "[goodwill-credit]" in render_system() and "at most 10% of the order's total" in render_system()
    assert refused("goodwill-credit").startswith("Sorry, I can't do that: a goodwill credit is for a delivered")
    spec = spec_of(TOOL)
    assert (spec.operation, spec.noun, spec.is_write) == ("goodwill_credit", "goodwill credit", True)


# --- the system of record's function -------------------------------------------------------


@pytest.fixture
def store():
    return copy.deepcopy(data())


def balance(store) -> float:
    return store["users"][CUSTOMER]["payment_methods"][GIFT]["balance"]


def test_the_store_credits_the_gift_card_once_per_order(store):
    result = run_tool(store, TOOL, {"order_id": DELIVERED, "amount": CAP, "reason": "late delivery",
                                    "payment_method_id": GIFT})
    order = json.loads(result)
    assert order["payment_history"][-1] == {"transaction_type": "goodwill_credit", "amount": 98.08,
                                            "payment_method_id": GIFT}
    assert order["status"] == "delivered" and order["goodwill_credit_reason"] == "late delivery"
    assert balance(store) == 128.08
    # the payments service moves it as money to the customer's gift card
    assert money_movements(TOOL, result) == [{"transaction_type": "refund", "amount": "98.08",
                                              "payment_method_id": GIFT}]
    before = copy.deepcopy(store)
    again = run_tool(store, TOOL, {"order_id": DELIVERED, "amount": "1.00", "reason": "damaged item",
                                   "payment_method_id": GIFT})
    assert again == "Error: the order already received a goodwill credit" and store == before


@pytest.mark.parametrize(("arguments", "error"), [
    ({"amount": "98.09"}, "Error: a goodwill credit is at most 98.08 for this order (10% of its total)"),
    ({"order_id": PENDING}, "Error: non-delivered order cannot be given a goodwill credit"),
    ({"payment_method_id": CARD}, "Error: a goodwill credit goes to a gift card"),
    ({"amount": "0.001"}, "Error: the amount must be positive, in whole cents"),
    ({"amount": "ten"}, "Error: invalid amount"),
    ({"reason": " "}, "Error: a goodwill credit needs its reason"),
])
def test_the_store_refuses_what_the_policy_refuses_and_changes_nothing(store, arguments, error):
    before = copy.deepcopy(store)
    call = {"order_id": DELIVERED, "amount": "10.00", "reason": "late delivery", "payment_method_id": GIFT,
            **arguments}
    assert run_tool(store, TOOL, call) == error
    assert store == before
