"""Supervisor approvals, pure (workflows/domain/policy/approvals.py, workflows/domain/catalogue/amounts.py): when a
refund-type write needs approval (threshold, policy flags), the money each tool moves, the
approval id's format, and every refused decision (unknown id, another operation's id,
second decision, after expiry) with its message and the approvals left as they were."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal
from urllib.parse import quote

import pytest
from pydantic import ValidationError
from temporalio.exceptions import ApplicationError

from workflows.domain.actions import call_digest, make_tool_call
from workflows.domain.policy.approvals import (
    Approval,
    ApprovalDecision,
    ApprovalPolicy,
    ApprovalStatus,
    approval_id_for,
    apply_decision,
    check_decision,
    open_approval,
    required_approval,
    variant_prices,
    workflow_id_of,
)
from workflows.domain.catalogue import CATALOGUE, REFUND_TOOLS, Execution, Scope, ToolClass, ToolSpec
from workflows.domain.catalogue.amounts import money
from workflows.domain.catalogue.folds import order_fact
from workflows.domain.errors import ErrorType
from tests.policy_fixtures import data

POLICY = ApprovalPolicy()
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
CARD, GIFT = "credit_card_1", "gift_card_1"


def order(*prices: float, status: str = "pending", refunded: bool = False):
    """An order of items priced ``prices`` paid once with CARD (plus a refund entry if asked)."""
    history = [{"transaction_type": "payment", "amount": round(sum(prices), 2), "payment_method_id": CARD}]
    if refunded:
        history.append({"transaction_type": "refund", "amount": 1.0, "payment_method_id": CARD})
    items = [{"item_id": f"i{n}", "product_id": "p1", "name": f"thing {n}", "price": price}
             for n, price in enumerate(prices)]
    return order_fact({"order_id": "#W1", "user_id": "u1", "status": status, "items": items,
                       "payment_history": history})


def cancel():
    return make_tool_call("cancel_pending_order", {"order_id": "#W1", "reason": "no longer needed"})


def ret(*item_ids: str, to: str = CARD):
    return make_tool_call("return_delivered_order_items",
                          {"order_id": "#W1", "item_ids": list(item_ids), "payment_method_id": to})


def change(tool: str, old: list[str], new: list[str], to: str = CARD):
    return make_tool_call(tool, {"order_id": "#W1", "item_ids": old, "new_item_ids": new, "payment_method_id": to})


# --- when approval is needed -----------------------------------------------------------


def test_exactly_the_threshold_needs_no_approval_and_one_cent_more_does():
    assert required_approval(cancel(), order(250.00, 250.00), POLICY) is None
    amount, reasons = required_approval(cancel(), order(250.00, 250.01), POLICY)
    assert amount == Decimal("500.01")
    assert reasons == ["[approval-threshold] 500.01 is above the approval threshold of 500.00"]


def test_amounts_are_decimal_not_float():
    # As floats these prices sum to 500.00000000000006, above the threshold; in decimal
    # currency they are exactly 500.00.
    assert 300.04 + 0.1 + 199.86 > 500
    assert required_approval(cancel(), order(300.04, 0.1, 199.86), POLICY) is None


def test_the_threshold_is_configurable():
    policy = ApprovalPolicy(threshold=Decimal("100.00"))
    assert required_approval(cancel(), order(100.00), policy) is None
    assert required_approval(cancel(), order(100.01), policy)[0] == Decimal("100.01")


def test_each_refund_tools_amount():
    big = order(320.55, 506.15)
    assert required_approval(cancel(), big, POLICY)[0] == Decimal("826.70")
    payment = make_tool_call("modify_pending_order_payment", {"order_id": "#W1", "payment_method_id": "paypal_1"})
    assert required_approval(payment, big, POLICY)[0] == Decimal("826.70")
    # return: the returned items only, each occurrence counted
    delivered = order(320.55, 506.15, 28.14, status="delivered")
    assert required_approval(ret("i1"), delivered, POLICY)[0] == Decimal("506.15")
    assert required_approval(ret("i0"), delivered, POLICY) is None
    assert required_approval(ret("i0", "i1"), delivered, POLICY)[0] == Decimal("826.70")
    # exchange / modify items: the absolute price difference, whichever way it goes
    prices = {"n1": Decimal("1100.00"), "n2": Decimal("10.00")}
    for tool in ("exchange_delivered_order_items", "modify_pending_order_items"):
        up = required_approval(change(tool, ["i1"], ["n1"]), delivered, POLICY, prices)
        assert up[0] == Decimal("593.85") and up[1][0].startswith("[approval-threshold]")
        down = required_approval(change(tool, ["i0", "i1"], ["n2", "n2"]), delivered, POLICY, prices)
        assert down[0] == Decimal("806.70")
        assert required_approval(change(tool, ["i0"], ["n2"]), delivered, POLICY, prices) is None


def test_an_unknown_new_price_fails_closed():
    amount, reasons = required_approval(change("exchange_delivered_order_items", ["i0"], ["nx"]),
                                        order(20.0, status="delivered"), POLICY, {})
    assert amount == Decimal("0.00")
    assert reasons[0].startswith("[unknown-price]") and "nx" in reasons[0]


def test_writes_that_move_no_money_never_need_approval():
    address = make_tool_call("modify_pending_order_address", {
        "order_id": "#W1", "address1": "1 Main St", "address2": "", "city": "Austin", "state": "TX",
        "zip": "78701", "country": "USA"})
    assert required_approval(address, order(9000.0), POLICY) is None


def test_refund_to_a_method_that_did_not_pay_is_flagged_above_its_limit():
    delivered = order(377.97, 28.14, status="delivered")
    amount, reasons = required_approval(ret("i0", to=GIFT), delivered, POLICY)
    assert amount == Decimal("377.97") and len(reasons) == 1
    assert reasons[0].startswith("[refund-elsewhere]") and GIFT not in reasons[0]  # no payment ids in reasons
    assert required_approval(ret("i1", to=GIFT), delivered, POLICY) is None          # 28.14: below 100.00
    assert required_approval(ret("i0", to=CARD), delivered, POLICY) is None          # the original method
    # an item change refunding its difference to a gift card is flagged; one charging it is not
    prices = {"cheap": Decimal("200.00"), "dear": Decimal("600.00")}
    tool = "exchange_delivered_order_items"
    refund = required_approval(change(tool, ["i0"], ["cheap"], to=GIFT), delivered, POLICY, prices)
    assert refund[1][0].startswith("[refund-elsewhere]")
    assert required_approval(change(tool, ["i0"], ["dear"], to=GIFT), delivered, POLICY, prices) is None


def test_a_second_refund_on_one_order_is_flagged():
    refunded_once = order(20.0, status="delivered", refunded=True)
    amount, reasons = required_approval(ret("i0"), refunded_once, POLICY)
    assert amount == Decimal("20.00") and reasons[0].startswith("[repeat-refund]")
    assert required_approval(cancel(), order(20.0), POLICY) is None
    assert required_approval(cancel(), order(20.0, refunded=True), POLICY)[1][0].startswith("[repeat-refund]")
    # an item change that charges the customer more refunds nothing: not flagged
    tool = "modify_pending_order_items"
    prices = {"dear": Decimal("25.00"), "cheap": Decimal("15.00")}
    assert required_approval(change(tool, ["i0"], ["dear"]), order(20.0, refunded=True), POLICY, prices) is None
    assert required_approval(change(tool, ["i0"], ["cheap"]), order(20.0, refunded=True), POLICY, prices)


def test_every_refund_tool_declares_its_amount():
    assert REFUND_TOOLS == {n for n, s in CATALOGUE.items() if s.approval_amount is not None}
    with pytest.raises(ValueError, match="approval_amount"):
        ToolSpec(name="x", args=CATALOGUE["cancel_pending_order"].args, tool_class=ToolClass.IRREVERSIBLE_WRITE,
                 description="x", scope=Scope.ORDER, execution=Execution.REFUND_WORKFLOW, detail=lambda s, a: "x")


def test_amounts_on_real_benchmark_orders():
    orders, products = data()["orders"], data()["products"]
    pending = order_fact(orders["#W4566809"])
    assert required_approval(cancel_of("#W4566809"), pending, POLICY)[0] == Decimal("826.70")
    facts = {pid: _product(p) for pid, p in products.items()}
    prices = variant_prices(facts)
    assert prices["1569829406"] == money(320.55)


def cancel_of(order_id: str):
    return make_tool_call("cancel_pending_order", {"order_id": order_id, "reason": "no longer needed"})


def _product(doc):
    from workflows.domain.records import ProductFact, Variant
    return ProductFact(product_id=doc["product_id"], name=doc["name"], variants={
        k: Variant(item_id=k, options=v["options"], available=v["available"], price=v["price"])
        for k, v in doc["variants"].items()})


# --- ids ----------------------------------------------------------------------------------


def test_approval_id_format_binds_the_operation_and_is_url_safe():
    digest = call_digest(cancel())
    approval_id = approval_id_for("refund-main-W1-conv-1.t3", "conv-1.t3", digest)
    assert approval_id.startswith("refund-main-W1-conv-1.t3~") and len(approval_id.split("~")[-1]) == 12
    assert approval_id == approval_id_for("refund-main-W1-conv-1.t3", "conv-1.t3", digest)  # deterministic
    assert approval_id != approval_id_for("refund-main-W1-conv-1.t3", "conv-1.t4", digest)
    assert approval_id != approval_id_for("refund-main-W1-conv-1.t3", "conv-1.t3", call_digest(ret("i0")))
    assert workflow_id_of(approval_id) == "refund-main-W1-conv-1.t3"


@pytest.mark.parametrize("workflow_id", ["support-a b/c?d#e", "support-x~y", "support-ünïcode", "support-100%",
                                         "support-user@example:1"])
def test_odd_workflow_ids_round_trip_and_stay_url_safe(workflow_id):
    approval_id = approval_id_for(workflow_id, "op", "d")
    assert quote(approval_id, safe=":@~%") == approval_id
    assert workflow_id_of(approval_id) == workflow_id


@pytest.mark.parametrize("bad", ["", "abc", "x~123", "x~0123456789AB", "~0123456789ab", "x y~0123456789ab",
                                 "x%zz~0123456789ab", "x%ff~0123456789ab", "x/y~0123456789ab",
                                 "a" * 2000 + "~0123456789ab"])
def test_malformed_approval_ids_are_value_errors(bad):
    with pytest.raises(ValueError):
        workflow_id_of(bad)


# --- decisions ----------------------------------------------------------------------------


def pending() -> list[Approval]:
    call = cancel()
    return [open_approval("refund-main-W1-c.t1", "c.t1", call, order(600.0), Decimal("600"), ["[x] y"], NOW,
                          ApprovalPolicy(timeout_seconds=3600))]


def decision(approval_id: str, verdict: str = "approve", approver: str = "alice") -> ApprovalDecision:
    return ApprovalDecision(approval_id=approval_id, decision=verdict, approver=approver)


def refused(approvals: list[Approval], d: ApprovalDecision, now: datetime,
            error: ErrorType = ErrorType.APPROVAL_REFUSED) -> str:
    before = [a.model_dump() for a in approvals]
    with pytest.raises(ApplicationError) as err:
        check_decision(approvals, d, now)
    assert err.value.type == error.value and err.value.non_retryable
    assert [a.model_dump() for a in approvals] == before  # state intact
    return err.value.message


def test_open_approval_records_the_request():
    [a] = pending()
    assert a.status is ApprovalStatus.PENDING and a.amount == Decimal("600.00")
    assert a.expires_at - a.requested_at == timedelta(hours=1)
    assert a.digest == call_digest(cancel()) and a.tool == "cancel_pending_order" and a.order_id == "#W1"


def test_approve_and_reject_record_approver_time_and_note():
    approvals = pending()
    d = ApprovalDecision(approval_id=approvals[0].approval_id, decision="reject", approver="bob.smith@corp",
                         note="too much")
    approval = check_decision(approvals, d, NOW)
    apply_decision(approval, d, NOW + timedelta(minutes=5))
    assert (approvals[0].status, approvals[0].approver, approvals[0].note) == (ApprovalStatus.REJECTED,
                                                                               "bob.smith@corp", "too much")
    assert approvals[0].decided_at == NOW + timedelta(minutes=5)
    approvals = pending()
    apply_decision(approvals[0], decision(approvals[0].approval_id), NOW)
    assert approvals[0].status is ApprovalStatus.APPROVED


def test_an_id_never_issued_is_unknown():
    approvals = pending()
    unknown = ErrorType.APPROVAL_UNKNOWN
    message = refused(approvals, decision("refund-main-W9-c.t1~0123456789ab"), NOW, unknown)
    assert "does not match the operation awaiting approval" in message
    assert "bound to one exact operation" in message
    apply_decision(approvals[0], decision(approvals[0].approval_id), NOW)
    message = refused(approvals, decision("refund-main-W9-c.t1~0123456789ab"), NOW, unknown)
    assert message == "no operation with this approval id is awaiting approval here"


def test_an_id_for_another_operation_or_other_arguments_is_unknown():
    approvals = pending()
    other_args = approval_id_for("refund-main-W1-c.t1", "c.t1", call_digest(cancel_of("#W2")))
    other_op = approval_id_for("refund-main-W1-c.t1", "c.t2", approvals[0].digest)
    for approval_id in (other_args, other_op):
        message = refused(approvals, decision(approval_id), NOW, ErrorType.APPROVAL_UNKNOWN)
        assert "bound to one exact operation and its arguments" in message
    assert approvals[0].status is ApprovalStatus.PENDING


def test_a_second_decision_is_refused_naming_the_first():
    approvals = pending()
    first = decision(approvals[0].approval_id, approver="alice")
    apply_decision(check_decision(approvals, first, NOW), first, NOW)
    for verdict in ("approve", "reject"):
        message = refused(approvals, decision(approvals[0].approval_id, verdict, "bob"), NOW)
        assert message == ("this approval was already approved by alice at 2026-11-29 12:00:00 UTC; "
                           "a decision cannot be changed")
    with pytest.raises(ValueError):
        apply_decision(approvals[0], decision(approvals[0].approval_id, "reject", "bob"), NOW)
    assert approvals[0].approver == "alice"


def test_a_decision_after_expiry_is_refused():
    approvals = pending()
    expiry = approvals[0].expires_at
    check_decision(approvals, decision(approvals[0].approval_id), expiry - timedelta(seconds=1))  # still open
    message = refused(approvals, decision(approvals[0].approval_id), expiry)
    assert message.startswith("this approval expired at 2026-11-29 13:00:00 UTC undecided")
    assert approvals[0].status is ApprovalStatus.PENDING  # the workflow's timer marks it, not the check
    from workflows.domain.policy.approvals import expire
    expire(approvals[0], expiry)
    assert "expired" in refused(approvals, decision(approvals[0].approval_id), expiry - timedelta(hours=1))


@pytest.mark.parametrize("fields", [
    {"approver": ""}, {"approver": "a" * 129}, {"approver": "alice smith"}, {"approver": "ålice"},
    {"approver": "-alice"}, {"approver": "alice\n"}, {"decision": "maybe"}, {"decision": "APPROVE"},
    {"note": "x" * 1001}, {"approval_id": ""},
])
def test_malformed_decisions_are_refused_by_their_model(fields):
    body = {"approval_id": "w~0123456789ab", "decision": "approve", "approver": "alice", **fields}
    with pytest.raises(ValidationError):
        ApprovalDecision(**body)


def test_policy_bounds():
    for bad in ({"threshold": Decimal("-1")}, {"timeout_seconds": 0}, {"refund_elsewhere_threshold": -1}):
        with pytest.raises(ValidationError):
            ApprovalPolicy(**bad)


def test_closing_withdraws_an_approved_write_that_never_ran_and_keeps_its_approver():
    # a cancel that lands after the approval and before the approved write ran: the approval
    # must not stay "approved" beside the cancelled step (operators would read the write as on its way)
    from workflows.domain import transitions as tr
    from workflows.domain.records import ConversationStatus, StepStatus
    from workflows.domain.state import ConversationState

    state = ConversationState(conversation_id="c")
    [approval] = pending()
    state.approvals = [approval]
    tr.start_step(state, approval.operation_id, approval.tool, "cancel #W1", operation_id=approval.operation_id)
    tr.finish_step(state, approval.operation_id, StepStatus.AWAITING_APPROVAL)
    d = ApprovalDecision(approval_id=approval.approval_id, decision="approve", approver="alice", note="checked")
    apply_decision(check_decision(state.approvals, d, NOW), d, NOW)
    done = approval.model_copy(update={"operation_id": "c.t2", "approval_id": "other"})
    state.approvals.append(done)  # approved and run: its step is done, it stays approved
    tr.start_step(state, "c.t2", done.tool, "cancel #W2", operation_id="c.t2")
    tr.finish_step(state, "c.t2", StepStatus.DONE)

    tr.close(state, ConversationStatus.CANCELLED, "the customer hung up")
    withdrawn, kept = state.approvals
    assert withdrawn.status is ApprovalStatus.WITHDRAWN and withdrawn.approver == "alice"
    assert withdrawn.decided_at == NOW and withdrawn.note == "the customer hung up (after approval: checked)"
    assert kept.status is ApprovalStatus.APPROVED
    assert [s.status for s in state.steps] == [StepStatus.CANCELLED, StepStatus.DONE]
