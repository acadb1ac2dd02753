"""What operators see in the Web UI, on the pure helpers: summaries and details carry ids but no
personal data, ``OrderIds`` accumulates within its bound without dropping, a refund's outcome
never quotes the order document, the Web UI list query is built safely, and every query,
signal and update of the workflows an operator meets has a description (the *Queries* tab and
``__temporal_workflow_metadata`` show it; read from the workflow definitions the worker
registers).
"""

from __future__ import annotations

import json
from decimal import Decimal
from urllib.parse import parse_qs, urlsplit

import pytest
from temporalio import workflow

from starter.cli.links import LinkError, list_query, list_url
from tests.policy_fixtures import CARD, CUSTOMER, DELIVERED, EMAIL, PENDING, data
from workflows.conversation.workflow import SupportWorkflow
from workflows.domain.actions import make_tool_call
from workflows.refund.view import outcome_text, refund_amount
from workflows.refund.workflow import RefundWorkflow
from workflows.retention.workflow import RetentionWorkflow
from workflows.visibility import ORDER_IDS_KEPT, accumulate, call_summary, describe_call


ADDRESS = {"address1": "557 Sunset Drive", "address2": "Suite 454", "city": "San Diego", "state": "CA",
           "country": "USA", "zip": "92147"}
PERSONAL_CALLS = [
    ("find_user_id_by_email", {"email": EMAIL}, [EMAIL]),
    ("find_user_id_by_name_zip", {"first_name": "Raj", "last_name": "Sanchez", "zip": "92147"},
     ["Raj", "Sanchez", "92147"]),
    ("get_user_details", {"user_id": CUSTOMER}, [CUSTOMER]),
    ("modify_pending_order_payment", {"order_id": PENDING, "payment_method_id": CARD}, [CARD]),
    ("modify_pending_order_address", {"order_id": PENDING, **ADDRESS}, ["Sunset", "San Diego", "92147"]),
    ("modify_user_address", {"user_id": CUSTOMER, **ADDRESS}, [CUSTOMER, "Sunset", "92147"]),
    ("return_delivered_order_items", {"order_id": DELIVERED, "item_ids": ["1234567890"], "payment_method_id": CARD},
     [CARD]),
]


@pytest.mark.parametrize("tool, arguments, personal", PERSONAL_CALLS, ids=[c[0] for c in PERSONAL_CALLS])
def test_summaries_and_details_of_a_call_carry_no_personal_data(tool, arguments, personal):
    call = make_tool_call(tool, arguments)
    for text in (call_summary(call), describe_call(call), call_summary(call, "refresh")):
        assert tool in text
        assert [p for p in personal if p in text] == []
    if "order_id" in arguments:
        assert arguments["order_id"] in call_summary(call) and arguments["order_id"] in describe_call(call)


def test_order_ids_accumulate_in_order_without_duplicates_and_never_drop_one():
    kept = accumulate([], [PENDING, DELIVERED, PENDING])
    assert kept == [PENDING, DELIVERED]
    assert accumulate(kept, [DELIVERED]) == [PENDING, DELIVERED]
    assert accumulate(kept, []) == kept  # an order no longer in the state stays indexed


def test_order_ids_are_bounded_and_the_first_ones_stay():
    many = [f"#W{n:07d}" for n in range(ORDER_IDS_KEPT + 20)]
    kept = accumulate([], many)
    assert kept == many[:ORDER_IDS_KEPT]
    long_ids = ["#" + "W" * 99 + str(n) for n in range(40)]  # 101 characters each
    assert sum(map(len, accumulate([], long_ids))) <= 1500


def test_a_refund_outcome_never_quotes_the_order_document():
    order = json.dumps(data()["orders"][PENDING])
    assert outcome_text(True, order) == "applied"
    assert outcome_text(True, order, replayed=True, notified=True) == (
        "applied (already recorded, not applied again, customer notified)")
    assert outcome_text(False, "Error: non-pending order cannot be cancelled") == (
        "refused: non-pending order cannot be cancelled")


def test_refund_amount_comes_from_the_fresh_read_in_decimal():
    order = data()["orders"][PENDING]
    cancel = make_tool_call("cancel_pending_order", {"order_id": PENDING, "reason": "no longer needed"})
    assert refund_amount(cancel, order) == Decimal("826.70")
    delivered = data()["orders"][DELIVERED]
    first = delivered["items"][0]
    ret = make_tool_call("return_delivered_order_items",
                         {"order_id": DELIVERED, "item_ids": [first["item_id"]], "payment_method_id": CARD})
    assert refund_amount(ret, delivered) == Decimal(str(first["price"])).quantize(Decimal("0.01"))
    pay = make_tool_call("modify_pending_order_payment", {"order_id": PENDING, "payment_method_id": CARD})
    assert refund_amount(pay, order) is None


def test_list_query_and_url():
    assert list_query("cust-abc") == 'CustomerId="cust-abc"'
    assert list_query(order_id=PENDING) == f'OrderIds="{PENDING}"'
    url = list_url("http://ui:8233/", "my ns", list_query("cust-abc", PENDING))
    parts = urlsplit(url)
    assert parts.path == "/namespaces/my%20ns/workflows" and "#" not in url
    assert parse_qs(parts.query)["query"] == [f'CustomerId="cust-abc" AND OrderIds="{PENDING}"']


@pytest.mark.parametrize("bad", ['#W1" OR WorkflowType!="x', "#W1'", "a\\b", "a\nb", "", "x" * 101])
def test_list_query_refuses_values_that_could_change_the_query(bad):
    with pytest.raises(LinkError):
        list_query(order_id=bad)
    with pytest.raises(LinkError, match="--customer"):
        list_query()


# --- Handler descriptions ---

WORKFLOWS = (SupportWorkflow, RefundWorkflow, RetentionWorkflow)
"""The workflows `worker.build_worker` registers."""

HANDLERS = [(cls.__name__, kind, name, handler.description)
            for cls in WORKFLOWS
            for kind in ("queries", "signals", "updates")
            for name, handler in getattr(workflow._Definition.must_from_class(cls), kind).items()]


def test_the_operators_workflows_have_handlers():
    names = {(cls, kind, name) for cls, kind, name, _ in HANDLERS}
    assert {("SupportWorkflow", "signals", "cancel"), ("SupportWorkflow", "updates", "send_message"),
            ("SupportWorkflow", "queries", "state"), ("RefundWorkflow", "updates", "decide_approval"),
            ("RefundWorkflow", "queries", "step")} <= names


@pytest.mark.parametrize("workflow_name, kind, name, description", HANDLERS,
                         ids=[f"{c}.{n}" for c, _, n, _ in HANDLERS])
def test_each_handler_is_described(workflow_name, kind, name, description):
    assert description and len(description.strip()) >= 20, f"{workflow_name} {kind} {name} has no description"


def test_the_refund_step_query_names_every_step_a_refund_enters():
    """The ``step`` query's description (the Web UI's *Queries* tab) left out
    ``awaiting_approval``, the step an operator most often finds a refund in."""
    import inspect
    import re

    from workflows.refund import approval_gate, workflow as refund

    entered = {m for module in (refund, approval_gate) for m in re.findall(r'_enter\("([a-z_]+)"', inspect.getsource(module))}
    entered |= {"done", "failed", "escalated"}  # entered through a conditional expression
    description = workflow._Definition.must_from_class(RefundWorkflow).queries["step"].description
    assert "awaiting_approval" in entered
    assert {step for step in entered if step not in description} == set(), description
