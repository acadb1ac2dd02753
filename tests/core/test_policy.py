"""Every policy rule, accepted and rejected, on states built from the real τ-bench data.

The validator is pure: each rejection must name its rule and leave the state exactly
as it was (compared as JSON before and after).
"""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

import pytest

from tests.policy_fixtures import (
    CARD,
    CUSTOMER,
    DELIVERED,
    DELIVERED_2,
    EMAIL,
    GIFT,
    PENDING,
    authenticated,
    data,
    fresh,
    other_customer_order,
    other_variant,
    read,
)
from workflows.domain.actions import (
    EndAction,
    ReplyAction,
    ToolCallAction,
    TransferAction,
    call_digest,
    make_tool_call,
    parse_proposed_action,
)
from workflows.domain.policy.validator import Rule, validate_execution, validate_proposal
from workflows.domain.state import Confirmation, ConversationStatus, PendingConfirmation, Phase

ADDRESS = {"address1": "1 Main St", "address2": "", "city": "Austin", "state": "TX", "country": "USA", "zip": "78701"}


def call(name: str, **args) -> ToolCallAction:
    return ToolCallAction(tool=make_tool_call(name, args))


def pending_items(order_id: str) -> list[str]:
    return [i["item_id"] for i in data()["orders"][order_id]["items"]]


def assert_rejected(state, action, rule: Rule) -> None:
    before = state.model_dump_json()
    verdict = validate_proposal(state, action)
    assert not verdict.accepted, f"expected {rule} rejection"
    assert verdict.rule == rule, verdict
    assert verdict.reason
    assert state.model_dump_json() == before


def assert_accepted(state, action, needs_confirmation: bool) -> None:
    verdict = validate_proposal(state, action)
    assert verdict.accepted, verdict
    assert verdict.needs_confirmation is needs_confirmation


# --- accepted -------------------------------------------------------------------


def test_authentication_lookups_are_allowed_before_anything_else():
    state = fresh()
    from workflows.domain import transitions as tr

    tr.receive_user_message(state, "My name is Raj Sanchez and my zip code is 92147")
    assert_accepted(state, call("find_user_id_by_email", email=EMAIL), False)
    assert_accepted(state, call("find_user_id_by_name_zip", first_name="Raj", last_name="Sanchez", zip="92147"), False)
    assert_accepted(state, call("calculate", expression="1+1"), False)
    assert_accepted(state, ReplyAction(text="Please tell me your email."), False)
    assert_accepted(state, TransferAction(summary="needs a human"), False)


def test_own_reads_are_allowed_after_authentication():
    state = authenticated(load_orders=False)
    assert_accepted(state, call("get_user_details", user_id=CUSTOMER), False)
    assert_accepted(state, call("get_order_details", order_id=PENDING), False)
    assert_accepted(state, call("list_all_product_types"), False)


def test_valid_writes_are_accepted_but_need_confirmation():
    state = authenticated()
    old, new = other_variant(PENDING)
    old_d, new_d = other_variant(DELIVERED)
    for action in [
        call("cancel_pending_order", order_id=PENDING, reason="no longer needed"),
        call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake"),
        call("modify_pending_order_address", order_id=PENDING, **ADDRESS),
        call("modify_user_address", user_id=CUSTOMER, **ADDRESS),
        call("modify_pending_order_items", order_id=PENDING, item_ids=[old], new_item_ids=[new], payment_method_id=CARD),
        call("return_delivered_order_items", order_id=DELIVERED, item_ids=[old_d], payment_method_id=CARD),
        call("return_delivered_order_items", order_id=DELIVERED, item_ids=[old_d], payment_method_id=GIFT),
        call("exchange_delivered_order_items", order_id=DELIVERED, item_ids=[old_d], new_item_ids=[new_d],
             payment_method_id=CARD),
        call("modify_pending_order_payment", order_id=PENDING, payment_method_id=GIFT)
        if state.customer.payment_methods[GIFT].balance >= state.orders[PENDING].payment_history[0].amount
        else call("modify_pending_order_address", order_id=PENDING, **ADDRESS),
    ]:
        assert_accepted(state, action, True)


def test_like_for_like_replacement_is_accepted():
    state = authenticated()
    old, _ = other_variant(DELIVERED)
    assert_accepted(state, call("exchange_delivered_order_items", order_id=DELIVERED, item_ids=[old],
                                new_item_ids=[old], payment_method_id=CARD), True)


def test_execution_with_the_users_yes_to_the_same_detail_is_accepted():
    state = authenticated()
    c = make_tool_call("cancel_pending_order", {"order_id": PENDING, "reason": "no longer needed"})
    pending = PendingConfirmation(operation_id="op", call=c, detail="d", digest=call_digest(c), proposed_turn=state.turn)
    state.turn += 1
    verdict = validate_execution(state, pending, Confirmation(operation_id="op", digest=call_digest(c), turn=state.turn, verbatim="yes"))
    assert verdict.accepted


# --- proposals outside the policy: each rejected with its rule, state unchanged ---

OTHER_ORDER, OTHER_USER = other_customer_order()


def _out_of_policy():
    old_p, new_p = other_variant(PENDING)
    old_d, new_d = other_variant(DELIVERED)
    other_product_item = next(
        vid for pid, p in data()["products"].items()
        if pid != data()["orders"][DELIVERED]["items"][0]["product_id"] for vid in p["variants"]
    )
    unavailable = None
    for order_id in (PENDING, DELIVERED, DELIVERED_2):
        for index in range(len(data()["orders"][order_id]["items"])):
            try:
                unavailable = (order_id, *other_variant(order_id, index, available=False))
                break
            except AssertionError:
                continue
        if unavailable:
            break
    cases = [
        # authenticate first
        ("fresh", call("get_user_details", user_id=CUSTOMER), Rule.AUTHENTICATE_FIRST),
        ("fresh", call("get_order_details", order_id=PENDING), Rule.AUTHENTICATE_FIRST),
        ("fresh", call("cancel_pending_order", order_id=PENDING, reason="no longer needed"), Rule.AUTHENTICATE_FIRST),
        ("fresh", call("return_delivered_order_items", order_id=DELIVERED, item_ids=[old_d], payment_method_id=CARD),
         Rule.AUTHENTICATE_FIRST),
        ("fresh", call("modify_user_address", user_id=CUSTOMER, **ADDRESS), Rule.AUTHENTICATE_FIRST),
        ("fresh", call("get_product_details", product_id="6086499569"), Rule.AUTHENTICATE_FIRST),
        # an identity the user never stated
        ("fresh", call("find_user_id_by_email", email="yusuf.rossi7301@example.com"), Rule.AUTHENTICATE_FIRST),
        ("fresh", call("find_user_id_by_name_zip", first_name="Raj", last_name="Sanchez", zip="92147"),
         Rule.AUTHENTICATE_FIRST),
        # one customer
        ("auth", call("get_user_details", user_id=OTHER_USER), Rule.ONE_CUSTOMER),
        ("auth", call("cancel_pending_order", order_id=OTHER_ORDER, reason="no longer needed"), Rule.ONE_CUSTOMER),
        ("auth", call("modify_user_address", user_id=OTHER_USER, **ADDRESS), Rule.ONE_CUSTOMER),
        ("auth", call("find_user_id_by_email", email="someone.else@example.com"), Rule.ONE_CUSTOMER),
        ("auth", call("find_user_id_by_name_zip", first_name="Yusuf", last_name="Rossi", zip="19122"), Rule.ONE_CUSTOMER),
        ("auth", call("return_delivered_order_items", order_id=DELIVERED, item_ids=[old_d],
                      payment_method_id="gift_card_0000001"), Rule.ONE_CUSTOMER),
        ("auth", call("modify_pending_order_payment", order_id=PENDING, payment_method_id="paypal_9999999"),
         Rule.ONE_CUSTOMER),
        # check status: acting on an order never read
        ("auth_no_orders", call("cancel_pending_order", order_id=PENDING, reason="no longer needed"), Rule.CHECK_STATUS),
        ("auth_no_orders", call("return_delivered_order_items", order_id=DELIVERED, item_ids=[old_d],
                                payment_method_id=CARD), Rule.CHECK_STATUS),
        # status preconditions
        ("auth", call("cancel_pending_order", order_id=DELIVERED, reason="no longer needed"), Rule.CANCEL_PENDING_ONLY),
        ("auth", call("modify_pending_order_address", order_id=DELIVERED, **ADDRESS), Rule.MODIFY_PENDING_ONLY),
        ("auth", call("modify_pending_order_items", order_id=DELIVERED, item_ids=[old_d], new_item_ids=[new_d],
                      payment_method_id=CARD), Rule.MODIFY_PENDING_ONLY),
        ("auth", call("return_delivered_order_items", order_id=PENDING, item_ids=[old_p], payment_method_id=CARD),
         Rule.RETURN_DELIVERED_ONLY),
        ("auth", call("exchange_delivered_order_items", order_id=PENDING, item_ids=[old_p], new_item_ids=[new_p],
                      payment_method_id=CARD), Rule.EXCHANGE_DELIVERED_ONLY),
        # cancel reason outside the fixed set
        ("auth", call("cancel_pending_order", order_id=PENDING, reason="found it cheaper"), Rule.CANCEL_PENDING_ONLY),
        # refund destination: the original method or a gift card only
        ("auth_paypal", None, Rule.RETURN_DELIVERED_ONLY),
        # tampered items: not in the order, or returned more times than bought
        ("auth", call("return_delivered_order_items", order_id=DELIVERED, item_ids=[old_p], payment_method_id=CARD),
         Rule.RETURN_DELIVERED_ONLY),
        ("auth", call("return_delivered_order_items", order_id=DELIVERED, item_ids=[old_d] * 5, payment_method_id=CARD),
         Rule.RETURN_DELIVERED_ONLY),
        # exchange / modify only to an available variant of the same product
        ("auth", call("exchange_delivered_order_items", order_id=DELIVERED, item_ids=[old_d],
                      new_item_ids=[other_product_item], payment_method_id=CARD), Rule.SAME_PRODUCT_VARIANT),
        ("auth", call("exchange_delivered_order_items", order_id=DELIVERED, item_ids=[old_d, old_d],
                      new_item_ids=[new_d, new_d], payment_method_id=CARD), Rule.SAME_PRODUCT_VARIANT),
        ("auth", call("exchange_delivered_order_items", order_id=DELIVERED, item_ids=[old_d, old_d],
                      new_item_ids=[new_d], payment_method_id=CARD), Rule.SAME_PRODUCT_VARIANT),
        ("auth", call("modify_pending_order_items", order_id=PENDING, item_ids=[old_p],
                      new_item_ids=["1234567890"], payment_method_id=CARD), Rule.SAME_PRODUCT_VARIANT),
        # modify payment must change the method
        ("auth", call("modify_pending_order_payment", order_id=PENDING, payment_method_id=CARD), Rule.MODIFY_PAYMENT),
        # a second exchange / item modification on the same order
        ("exchanged", call("exchange_delivered_order_items", order_id=DELIVERED, item_ids=[old_d],
                           new_item_ids=[new_d], payment_method_id=CARD), Rule.ITEM_CHANGE_ONCE),
        ("modified", call("modify_pending_order_items", order_id=PENDING, item_ids=[old_p], new_item_ids=[new_p],
                          payment_method_id=CARD), Rule.ITEM_CHANGE_ONCE),
        # closed conversation
        ("closed", call("get_order_details", order_id=PENDING), Rule.CONVERSATION_CLOSED),
        ("closed", ReplyAction(text="hello"), Rule.CONVERSATION_CLOSED),
    ]
    if unavailable:
        order_id, old_u, new_u = unavailable
        tool = "modify_pending_order_items" if order_id == PENDING else "exchange_delivered_order_items"
        cases.append(("auth", call(tool, order_id=order_id, item_ids=[old_u], new_item_ids=[new_u],
                                   payment_method_id=CARD), Rule.SAME_PRODUCT_VARIANT))
    return cases


def _state_for(kind: str):
    if kind == "fresh":
        return fresh()
    if kind == "auth_no_orders":
        return authenticated(load_orders=False)
    state = authenticated()
    if kind == "closed":
        state.status, state.phase = ConversationStatus.ENDED, Phase.CLOSED
    if kind in ("exchanged", "modified"):
        from workflows.domain import transitions as tr

        order_id = DELIVERED if kind == "exchanged" else PENDING
        old, new = other_variant(order_id)
        tool = "exchange_delivered_order_items" if kind == "exchanged" else "modify_pending_order_items"
        done = make_tool_call(tool, {"order_id": order_id, "item_ids": [old], "new_item_ids": [new],
                                     "payment_method_id": CARD})
        order = dict(data()["orders"][order_id])
        order["status"] = "exchange requested" if kind == "exchanged" else "pending (item modified)"
        import json

        tr.apply_write_result(state, done, "op-1", f"{tool}:{order_id}:op-1", json.dumps(order), True)
    return state


OUT_OF_POLICY = _out_of_policy()


def test_there_are_at_least_30_out_of_policy_proposals():
    assert len(OUT_OF_POLICY) >= 30


@pytest.mark.parametrize("kind,action,rule", OUT_OF_POLICY, ids=[f"{i}-{c[2].value}" for i, c in enumerate(OUT_OF_POLICY)])
def test_out_of_policy_proposal_is_rejected_with_its_rule(kind, action, rule):
    if kind == "auth_paypal":
        # refund to a method of the customer that is neither the original nor a gift card
        state = authenticated()
        from workflows.domain.state import PaymentMethod

        state.customer.payment_methods["paypal_1111111"] = PaymentMethod(id="paypal_1111111", source="paypal")
        old, _ = other_variant(DELIVERED)
        action = call("return_delivered_order_items", order_id=DELIVERED, item_ids=[old],
                      payment_method_id="paypal_1111111")
        assert_rejected(state, action, rule)
        return
    assert_rejected(_state_for(kind), action, rule)


def test_gift_card_must_cover_the_price_difference():
    state = authenticated()
    state.customer.payment_methods[GIFT].balance = Decimal("0.50")
    found = [
        (order_id, item["item_id"], vid)
        for order_id in (DELIVERED, DELIVERED_2, PENDING)
        for item in data()["orders"][order_id]["items"]
        for vid, v in data()["products"][item["product_id"]]["variants"].items()
        if v["available"] and v["price"] > item["price"] + 0.5
    ]
    assert found, "fixture customer has no item with a pricier variant"
    order_id, old, new = found[0]
    tool = "modify_pending_order_items" if order_id == PENDING else "exchange_delivered_order_items"
    assert_rejected(state, call(tool, order_id=order_id, item_ids=[old], new_item_ids=[new], payment_method_id=GIFT),
                    Rule.PRICE_DIFFERENCE_PAYMENT)


def test_gift_card_must_cover_the_order_total_when_paying_with_it():
    state = authenticated()
    state.customer.payment_methods[GIFT].balance = Decimal("1.00")
    assert_rejected(state, call("modify_pending_order_payment", order_id=PENDING, payment_method_id=GIFT),
                    Rule.MODIFY_PAYMENT)


# --- confirmation ------------------------------------------------------------------


def _pending(state, **args):
    c = make_tool_call("cancel_pending_order", {"order_id": PENDING, "reason": "no longer needed", **args})
    return PendingConfirmation(operation_id="op", call=c, detail="d", digest=call_digest(c), proposed_turn=state.turn)


def test_execution_without_confirmation_is_rejected():
    state = authenticated()
    verdict = validate_execution(state, _pending(state), None)
    assert verdict.rule == Rule.EXPLICIT_CONFIRMATION and not verdict.accepted


def test_confirmation_of_a_different_detail_is_rejected():
    state = authenticated()
    pending = _pending(state)
    other = make_tool_call("cancel_pending_order", {"order_id": PENDING, "reason": "ordered by mistake"})
    state.turn += 1
    verdict = validate_execution(state, pending, Confirmation(operation_id="op", digest=call_digest(other), turn=state.turn, verbatim="yes"))
    assert verdict.rule == Rule.EXPLICIT_CONFIRMATION and not verdict.accepted


def test_confirmation_in_the_same_turn_as_the_proposal_is_rejected():
    state = authenticated()
    pending = _pending(state)
    verdict = validate_execution(state, pending, Confirmation(operation_id="op", digest=pending.digest, turn=state.turn, verbatim="yes"))
    assert verdict.rule == Rule.EXPLICIT_CONFIRMATION and not verdict.accepted


def test_a_yes_that_answered_an_earlier_identical_proposal_is_rejected():
    state = authenticated()
    pending = _pending(state)
    state.turn += 1
    stale = Confirmation(operation_id="an-earlier-op", digest=pending.digest, turn=state.turn, verbatim="yes")
    verdict = validate_execution(state, pending, stale)
    assert verdict.rule == Rule.EXPLICIT_CONFIRMATION and "earlier" in verdict.reason


def test_confirmed_write_is_rechecked_against_the_current_state():
    state = authenticated()
    pending = _pending(state)
    state.orders[PENDING].status = "cancelled"  # changed since the detail was shown
    state.turn += 1
    verdict = validate_execution(state, pending, Confirmation(operation_id="op", digest=pending.digest, turn=state.turn, verbatim="yes"))
    assert verdict.rule == Rule.CANCEL_PENDING_ONLY


def test_invented_fields_and_unknown_tools_do_not_parse():
    with pytest.raises(ValueError):
        parse_proposed_action({"kind": "tool_call", "tool": {"name": "cancel_pending_order", "arguments": {
            "order_id": PENDING, "reason": "no longer needed", "refund_amount": 99999}}})
    with pytest.raises(ValueError):
        parse_proposed_action({"kind": "tool_call", "tool": {"name": "refund_to_any_card", "arguments": {}}})
    with pytest.raises(ValueError):
        parse_proposed_action({"kind": "reply"})
    assert isinstance(parse_proposed_action({"kind": "end"}), EndAction)


def test_other_customers_order_read_is_withheld_from_the_state():
    state = authenticated(load_orders=False)
    state.customer.details_loaded = False  # order list unknown: the read is allowed, its result withheld
    shown = read(state, "get_order_details", order_id=OTHER_ORDER)
    assert shown.startswith("Error") and OTHER_ORDER not in state.orders


def test_a_write_on_an_order_handed_to_a_human_agent_is_refused_and_only_that():
    # an approval expired and its ticket opened: a second write on that order would be parked
    # for a supervisor beside the human agent holding it
    from workflows.domain import transitions as tr
    from workflows.domain.policy.approvals import HANDED_TO_HUMAN, ApprovalPolicy, ApprovalStatus, open_approval
    from workflows.domain.policy.validator import handed_over_refusal
    from workflows.domain.records import StepStatus

    state = authenticated()
    cancel = call("cancel_pending_order", order_id=PENDING, reason="no longer needed")
    approval = open_approval("support-c~1", "c.t1", cancel.tool, state.orders[PENDING], Decimal("826.70"), ["[x] y"],
                             datetime(2026, 12, 1, tzinfo=timezone.utc), ApprovalPolicy())
    approval.status = ApprovalStatus.EXPIRED
    state.approvals.append(approval)
    tr.start_step(state, "c.t1", "cancel_pending_order", "cancel", operation_id="c.t1")
    tr.finish_step(state, "c.t1", StepStatus.FAILED, f"the approval expired undecided; {HANDED_TO_HUMAN}")
    refused = handed_over_refusal(state, cancel)
    assert refused is not None and refused.rule is Rule.APPROVAL_EXPIRED and PENDING in refused.reason
    assert handed_over_refusal(state, call("get_order_details", order_id=PENDING)) is None  # a read
    other = call("return_delivered_order_items", order_id=DELIVERED, item_ids=pending_items(DELIVERED)[:1],
                 payment_method_id=CARD)
    assert handed_over_refusal(state, other) is None  # another order
    # no ticket could be opened: nobody has it, so the user may ask again
    tr.finish_step(state, "c.t1", StepStatus.FAILED, "the approval expired undecided; no human-agent ticket could "
                                                     "be opened")
    assert handed_over_refusal(state, cancel) is None
