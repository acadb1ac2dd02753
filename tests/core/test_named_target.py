"""The named-target clause: a write acts on the order and items the user's message names
(the message that asked for it; for a yes, the one before), refused with the clause
otherwise; a message naming none leaves the check out."""

from __future__ import annotations

from tests.core.test_policy import ADDRESS, assert_accepted, assert_rejected, call, pending_items
from tests.policy_fixtures import CARD, DELIVERED, DELIVERED_2, GIFT, PENDING, authenticated, other_variant
from workflows.domain import transitions as tr
from workflows.domain.policy.text import CLAUSE_REFUSALS, POLICY_CLAUSES
from workflows.domain.policy.validator import Rule, validate_proposal


def _asked(text: str, *more: str):
    state = authenticated()
    for message in (text, *more):
        tr.receive_user_message(state, message)
    return state


def test_the_clause_is_in_the_policy_the_model_reads_and_has_a_sentence_for_users():
    assert "named-target" in POLICY_CLAUSES and "named-target" in CLAUSE_REFUSALS


def test_a_cancel_of_another_order_than_the_one_named_is_refused():
    state = _asked(f"What is the status of {DELIVERED}?", f"{PENDING}?", f"{DELIVERED} again?",
                   f"Please cancel order {DELIVERED_2}, I ordered it by mistake")
    assert_rejected(state, call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake"), Rule.NAMED_TARGET)
    reason = validate_proposal(state, call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake")).reason
    assert DELIVERED_2 in reason and PENDING in reason  # the model can act on it: which was named, which proposed


def test_the_named_order_is_accepted_and_a_message_naming_none_leaves_the_check_out():
    state = _asked(f"Please cancel order {PENDING}, I ordered it by mistake")
    assert_accepted(state, call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake"), True)
    state = _asked("Please cancel my pending order, I ordered it by mistake")
    assert_accepted(state, call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake"), True)


def test_a_return_from_another_order_is_refused():
    state = _asked(f"I want to return everything from {DELIVERED}")
    items = [i for i in state.orders[DELIVERED_2].items]
    action = call("return_delivered_order_items", order_id=DELIVERED_2, item_ids=[items[0].item_id], payment_method_id=GIFT)
    assert_rejected(state, action, Rule.NAMED_TARGET)


def test_an_exchange_of_another_item_than_the_one_named_is_refused():
    old, new = other_variant(DELIVERED, 0)
    other_item, other_new = other_variant(DELIVERED, 1)
    state = _asked(f"I'd like to exchange item {old} of order {DELIVERED} for {new}")
    wrong = call("exchange_delivered_order_items", order_id=DELIVERED, item_ids=[other_item], new_item_ids=[other_new],
                 payment_method_id=CARD)
    assert_rejected(state, wrong, Rule.NAMED_TARGET)
    right = call("exchange_delivered_order_items", order_id=DELIVERED, item_ids=[old], new_item_ids=[new],
                 payment_method_id=CARD)
    verdict = validate_proposal(state, right)
    assert verdict.rule != Rule.NAMED_TARGET, verdict  # the item named passes this clause (others may judge it)


def test_a_yes_is_judged_by_the_message_that_asked():
    state = _asked(f"Please cancel order {PENDING}, I ordered it by mistake", "yes")
    assert_accepted(state, call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake"), True)
    state = _asked(f"Change the address of {DELIVERED}", "yes")
    action = call("modify_pending_order_address", order_id=PENDING, **ADDRESS)
    assert_rejected(state, action, Rule.NAMED_TARGET)


def test_reads_and_writes_without_an_order_are_not_judged_by_it():
    state = _asked(f"status of {DELIVERED}")
    assert_accepted(state, call("get_order_details", order_id=PENDING), False)
    assert_accepted(state, call("modify_user_address", user_id=state.customer.user_id, **ADDRESS), True)


def test_the_check_can_be_left_out_for_runs_that_replay_without_it():
    state = _asked(f"Please cancel order {DELIVERED_2}")
    action = call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake")
    assert validate_proposal(state, action, named_target=False).accepted
    assert pending_items(PENDING)  # the fixture's pending order has items: the refusal above is the clause's alone


def test_an_order_id_in_another_case_or_script_still_names_the_order():
    for written in ("#w1067251", "#W１０６７２５１", "W 1067251"):
        state = _asked(f"status of {PENDING}?", f"ok now cancel {written} instead")
        assert_rejected(state, call("cancel_pending_order", order_id=PENDING, reason="no longer needed"),
                        Rule.NAMED_TARGET)


def test_an_order_id_of_the_wrong_length_leaves_the_target_unclear():
    state = _asked(f"status of {PENDING}?", "cancel #W10672510 please")
    assert_rejected(state, call("cancel_pending_order", order_id=PENDING, reason="no longer needed"), Rule.NAMED_TARGET)
    assert "ask the user which order" in validate_proposal(
        state, call("cancel_pending_order", order_id=PENDING, reason="no longer needed")).reason


def test_every_order_id_of_a_long_message_counts():
    others = " ".join(f"#W{n:07d}" for n in range(1, 12))
    state = _asked(f"These are not mine: {others}. Please cancel my order {PENDING}, ordered by mistake")
    assert_accepted(state, call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake"), True)
    reason = validate_proposal(_asked(f"{others}, cancel one"),
                               call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake")).reason
    assert "and 6 more" in reason and len(reason) < 300  # the reason names a few, never all of them
