"""Breaker tests on the pure parts (no Temporal): confirmation words, prompt bounds.

Each test asserts the behaviour the README/docstrings promise; a failing test is a defect.

These tests were written by an adversarial review against the code of that day; each
docstring describes the defect as it was found (file:line references are as of the
review). All are fixed now, and each test keeps guarding against its return.
"""

from __future__ import annotations

import json

import pytest

from tests.policy_fixtures import PENDING, authenticated, data
from workflows import transitions as tr
from workflows.actions import make_tool_call, parse_proposed_action
from workflows.confirm import describe, is_no, is_yes
from workflows.policy import validate_proposal
from workflows.prompt import render_snapshot
from workflows.state import ConversationState

# --- explicit confirmation -------------------------------------------------------
# confirm.is_yes: "An explicit yes: the message starts with an affirmative word and has no
# negation." README: a write "runs only after the user's 'yes' to that detail".
# Each message below is NOT an explicit yes to the shown detail, yet is_yes accepts it.

NOT_A_YES = [
    "ok, never mind",                      # a withdrawal
    "okay cancel that",                    # is_no's own phrase, but is_yes wins in SupportWorkflow._turn
    "yes?",                                # a question
    "ok what would the refund be?",        # a question
    "confirm the amount first please",     # asks for information
    "yes but only the first item",         # a conditional yes to a different detail
    "sure, wait",                          # "wait" is in is_no, not checked by is_yes
    "yes, dont do it",                     # negation without an apostrophe
    "Yes, but don\u2019t cancel it",       # typographic apostrophe (phones, macOS)
    "ok hold on",
    "sure... nah",
]


@pytest.mark.parametrize("text", NOT_A_YES)
def test_non_explicit_yes_is_not_taken_as_confirmation(text):
    assert not is_yes(text), f"{text!r} is taken as the user's explicit yes"


@pytest.mark.parametrize("text", ["yes", "Yes!!", "yes.", "y", "Sure", "ok", "go ahead", "I confirm"])
def test_plain_yes_variants_held_up(text):
    assert is_yes(text) and not is_no(text)


@pytest.mark.parametrize("text", ["sure not", "no... actually yes", "yes don't", "not yet", "nope"])
def test_negations_held_up(text):
    assert not is_yes(text)


# --- bounded prompt ----------------------------------------------------------------
# README/prompt.py: "It never sees the full transcript, so the prompt stays bounded however
# long the conversation runs." Pinned facts are append-only and fully rendered, so each
# legal (<= 8 KB) message can add ~1.3k facts; the snapshot (an activity input, i.e. a
# Temporal payload, default hard limit 2 MB) grows without bound.


def _numbers_message(turn: int) -> str:
    words, n = [], 0
    while len(" ".join(words).encode()) < 8192 - 6:
        words.append(f"{(turn * 2000 + n) % 100000:05d}")
        n += 1
    return " ".join(words)


def test_prompt_stays_bounded_under_legal_messages():
    state = ConversationState(conversation_id="bound")
    sizes = []
    for turn in range(30):
        text = _numbers_message(turn)
        assert len(text.encode()) <= 8192
        tr.receive_user_message(state, text)
        snap = render_snapshot(state)
        sizes.append(len(snap.system) + len(snap.content))
    # the prompt keeps 6 turns (<= 48 KB of user text) plus bounded windows: it should
    # not be megabytes. It is: every 5-digit number is pinned forever and rendered.
    assert sizes[-1] < 1_000_000, f"snapshot grew to {sizes[-1]} bytes after 30 legal messages: {sizes[::5]}"


# --- cancel detail vs money moved --------------------------------------------------


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
