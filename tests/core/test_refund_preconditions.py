"""Preconditions of writes that move money (``REFUND_TOOLS``), on the pure policy: the
confirmation detail of a cancel states the refund the tool will really make, and after
an item change or a return no further money write on that order is accepted.

The same preconditions
in running conversations are tests/workflows/test_refund_preconditions.py.
"""

from __future__ import annotations

import json

from tests.policy_fixtures import PENDING, authenticated, data
from workflows.domain import transitions as tr
from workflows.domain.actions import make_tool_call, parse_proposed_action
from workflows.domain.policy.confirm import describe
from workflows.domain.policy.validator import validate_proposal


def test_cancel_detail_after_payment_change_states_the_refund_truthfully():
    """After a payment-method change, the order's payment_history holds 3 entries
    (payment old, payment new, refund old). cancel_pending_order (benchmark tool) refunds
    EVERY entry, and credits gift cards for each. The confirmation detail still says
    'The full amount of <total> is refunded to the original payment method.' and the
    policy accepts the cancel."""
    state = authenticated()
    order = json.loads(json.dumps(data()["orders"][PENDING]))
    amount = order["payment_history"][0]["amount"]
    order["payment_history"] += [
        {"transaction_type": "payment", "amount": amount, "payment_method_id": "gift_card_2259499"},
        {"transaction_type": "refund", "amount": amount, "payment_method_id": "credit_card_3362387"},
    ]
    tr.apply_read_result(state, make_tool_call("get_order_details", {"order_id": PENDING}), json.dumps(order))
    call = make_tool_call("cancel_pending_order", {"order_id": PENDING, "reason": "no longer needed"})
    verdict = validate_proposal(state, parse_proposed_action({"kind": "tool_call", "tool": call.model_dump()}))
    detail = describe(state, call)
    if verdict.accepted:
        # if it is allowed at all, the shown detail must match what the tool will do:
        # refunds of 3 x amount, including one to gift_card_2259499
        assert "gift_card_2259499" in detail, detail


# --- follow-up writes after a money write ------------------------------------------


def _apply(state, name, args):
    import copy

    from systems.retail.tools import run_tool
    from tests.policy_fixtures import data
    store = copy.deepcopy(data())
    result = run_tool(store, name, args)
    assert not result.startswith("Error"), result
    tr.apply_write_result(state, make_tool_call(name, args), "op", "key", result, True)
    return store


def _verdict(state, name, args):
    return validate_proposal(state, parse_proposed_action({"kind": "tool_call",
                                                            "tool": make_tool_call(name, args).model_dump()}))


def test_follow_up_writes_after_item_change_return_or_exchange_refused():
    from tests.policy_fixtures import CARD, DELIVERED, GIFT, PENDING, other_variant
    state = authenticated()
    old, new = other_variant(PENDING)
    _apply(state, "modify_pending_order_items",
           {"order_id": PENDING, "item_ids": [old], "new_item_ids": [new], "payment_method_id": CARD})
    for name, args in (("cancel_pending_order", {"order_id": PENDING, "reason": "no longer needed"}),
                       ("modify_pending_order_payment", {"order_id": PENDING, "payment_method_id": GIFT})):
        assert not _verdict(state, name, args).accepted, name
    state = authenticated()
    items = [i.item_id for i in state.orders[DELIVERED].items]
    _apply(state, "return_delivered_order_items", {"order_id": DELIVERED, "item_ids": items[:1],
                                                   "payment_method_id": CARD})
    for name, args in (("exchange_delivered_order_items", {"order_id": DELIVERED, "item_ids": items[1:2] or items[:1],
                                                           "new_item_ids": items[1:2] or items[:1],
                                                           "payment_method_id": CARD}),
                       ("return_delivered_order_items", {"order_id": DELIVERED, "item_ids": items[1:2] or items[:1],
                                                         "payment_method_id": CARD})):
        assert not _verdict(state, name, args).accepted, name
