"""The backtest's pure parts: the state a recorded view stands for, verdict classes, and
how a new proposal is classified against the recorded one."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

import pytest

from starter.ops.backtest_diff import (
    ACCEPTED,
    MALFORMED,
    Difference,
    UnreadableView,
    classify,
    describe,
    normalised,
    policy_class,
    recorded_class,
    state_from_view,
)
from tests.policy_fixtures import CARD, CUSTOMER, DELIVERED, EMAIL, PENDING, authenticated, data
from workflows.domain import transitions as tr
from workflows.domain.actions import make_tool_call
from workflows.domain.policy.approvals import ApprovalPolicy, open_approval
from workflows.domain.journal import Verdict
from workflows.domain.prompt import state_view

NOW = datetime(2026, 11, 30, tzinfo=timezone.utc)


def call(name: str, **arguments) -> dict:
    return {"kind": "tool_call", "tool": {"name": name, "arguments": arguments}}


def delivered_items(order_id: str = DELIVERED) -> list[str]:
    return [i["item_id"] for i in data()["orders"][order_id]["items"]]


PROPOSALS = [
    call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake"),  # accepted (a write)
    call("cancel_pending_order", order_id=DELIVERED, reason="ordered by mistake"),  # cancel-pending-only
    call("return_delivered_order_items", order_id=DELIVERED, item_ids=delivered_items(), payment_method_id=CARD),
    call("return_delivered_order_items", order_id=PENDING, item_ids=delivered_items(PENDING), payment_method_id=CARD),
    call("get_user_details", user_id="someone_else_1"),  # one-customer
    call("modify_pending_order_payment", order_id=PENDING, payment_method_id="paypal_0000000"),  # one-customer
    {"kind": "reply", "text": "Hello"},
    {"kind": "transfer_to_human", "summary": "needs a human"},
]


@pytest.mark.parametrize("proposal", PROPOSALS, ids=lambda p: describe(p))
def test_the_rebuilt_state_gets_the_verdicts_of_the_state_itself(proposal):
    state = authenticated()
    rebuilt = state_from_view(state_view(state))
    assert policy_class(rebuilt, proposal) == policy_class(state, proposal)


def test_the_rebuilt_state_covers_accepted_and_several_rejection_rules():
    classes = {policy_class(authenticated(), p)[0] for p in PROPOSALS}
    assert classes == {ACCEPTED, "rejected:cancel-pending-only", "rejected:return-delivered-only",
                       "rejected:one-customer"}


def test_a_pending_approval_is_rebuilt_from_its_step_so_a_second_write_on_the_order_waits():
    state = authenticated()
    cancel = make_tool_call("cancel_pending_order", {"order_id": PENDING, "reason": "ordered by mistake"})
    pending = tr.await_confirmation(state, "op-1", cancel, "Cancel order #W4566809 (reason: ordered by mistake).")
    tr.take_pending(state)
    tr.await_approval(state, pending, open_approval("support-x", "op-1", cancel, state.orders[PENDING],
                                                    Decimal("826.70"), [], NOW, ApprovalPolicy()))
    address = call("modify_pending_order_address", order_id=PENDING, address1="1 Main St", address2="",
                   city="Austin", state="TX", country="USA", zip="78701")
    rebuilt = state_from_view(state_view(state))
    assert policy_class(state, address)[0] == "rejected:awaiting-approval"
    assert policy_class(rebuilt, address) == policy_class(state, address)
    # another order is not held up
    other = call("return_delivered_order_items", order_id=DELIVERED, item_ids=delivered_items(), payment_method_id=CARD)
    assert policy_class(rebuilt, other)[0] == ACCEPTED


def test_a_view_the_current_state_cannot_load_is_an_unreadable_view():
    view = state_view(authenticated())
    view["customer"] = {"user_id": CUSTOMER}  # authenticated_via and _turn missing
    with pytest.raises(UnreadableView, match="customer"):
        state_from_view(view)
    with pytest.raises(UnreadableView):
        state_from_view({"turn": "many"})


def test_no_proposal_or_an_unparseable_one_is_malformed():
    state = authenticated()
    assert policy_class(state, None)[0] == MALFORMED
    assert policy_class(state, call("refund_everything", order_id=PENDING)) == (MALFORMED, "the proposal no longer parses")


@pytest.mark.parametrize("verdict", [v for v in Verdict if v.accepted])
def test_every_accepted_verdict_is_the_accepted_class(verdict):
    assert recorded_class(verdict.value, None) == ACCEPTED


def test_rejected_malformed_and_non_policy_verdicts():
    assert recorded_class("rejected", "check-status") == "rejected:check-status"
    assert recorded_class("malformed", "malformed-model-output") == MALFORMED
    assert recorded_class("superseded", "superseded-by-newer-message") is None  # discarded before validation
    assert recorded_class(None, None) is None  # the turn is not recorded yet
    assert recorded_class("no-such-verdict", None) is None


def test_classification():
    ret = PROPOSALS[2]
    transfer = {"kind": "transfer_to_human", "summary": "x"}
    assert classify(ret, ACCEPTED, ret, ACCEPTED) is Difference.SAME
    assert classify(ret, ACCEPTED, transfer, ACCEPTED) is Difference.DIFFERENT_PROPOSAL
    assert classify(ret, ACCEPTED, PROPOSALS[0], "rejected:check-status") is Difference.DIFFERENT_VERDICT
    # the same proposal judged otherwise (the policy changed) is a different verdict, not "same"
    assert classify(ret, "rejected:one-customer", ret, ACCEPTED) is Difference.DIFFERENT_VERDICT
    # two rejections under different rules differ in verdict; under the same rule only in proposal
    assert classify(ret, "rejected:a", transfer, "rejected:b") is Difference.DIFFERENT_VERDICT
    assert classify(ret, "rejected:a", PROPOSALS[3], "rejected:a") is Difference.DIFFERENT_PROPOSAL
    assert classify(None, MALFORMED, None, MALFORMED) is Difference.SAME
    assert classify(None, MALFORMED, ret, ACCEPTED) is Difference.DIFFERENT_VERDICT


def test_proposals_compare_as_the_current_code_writes_them():
    assert normalised({"kind": "end"}) == {"kind": "end", "text": "Thank you, goodbye."}
    assert classify({"kind": "end"}, ACCEPTED, {"kind": "end", "text": "Thank you, goodbye."}, ACCEPTED) \
        is Difference.SAME
    reordered = {"tool": {"arguments": {"reason": "ordered by mistake", "order_id": PENDING},
                          "name": "cancel_pending_order"}, "kind": "tool_call"}
    assert classify(PROPOSALS[0], ACCEPTED, reordered, ACCEPTED) is Difference.SAME


def test_labels_show_no_personal_data():
    assert describe(PROPOSALS[2]) == f"return_delivered_order_items({DELIVERED})"
    assert describe(call("find_user_id_by_email", email=EMAIL)) == "find_user_id_by_email()"
    assert describe(call("get_user_details", user_id=CUSTOMER)) == "get_user_details()"
    assert describe(None) == MALFORMED and describe({"kind": "reply", "text": "hi"}) == "reply"


def test_a_view_recorded_under_an_older_state_schema_is_migrated_before_the_policy_judges_it():
    view = state_view(authenticated())
    view["schema_version"] = 1  # v1 held money as float
    for order in view["orders"].values():
        order["total"] = float(order["total"])
        for item in order["items"]:
            item["price"] = float(item["price"])
    rebuilt = state_from_view(view)
    assert rebuilt.schema_version == 3 and str(rebuilt.orders[PENDING].total) == "826.70"
    for proposal in PROPOSALS:
        assert policy_class(rebuilt, proposal) == policy_class(authenticated(), proposal)
    view["schema_version"] = 99
    with pytest.raises(UnreadableView, match="newer version"):
        state_from_view(view)
