"""Second adversarial pass, pure parts (no Temporal): prompt bounds, confirmation words,
identity pinning. A failing test is a defect; tests named *_held_up document what held.

These tests were written by an adversarial review against the code of that day; each
docstring describes the defect as it was found (file:line references are as of the
review). All are fixed now, and each test keeps guarding against its return.
"""

from __future__ import annotations

import pytest

from tests.policy_fixtures import CUSTOMER, EMAIL, authenticated, fresh
from workflows import transitions as tr
from workflows.actions import make_tool_call, parse_proposed_action
from workflows.confirm import is_no, is_yes
from workflows.facts import extract_facts
from workflows.policy import validate_proposal
from workflows.prompt import render_snapshot
from workflows.state import ConversationState, Role

FS = "\x1c"  # FILE SEPARATOR: str.isspace() is True, so the regex \s matches it; JSON escapes it as \u001c


def _name_message(i: int) -> str:
    """A legal (< 8 KB) message that pins one 'name' fact whose verbatim is ~8 KB."""
    first = "A" + "".join("abcdefghijklmnop"[(i >> k) & 15] for k in range(0, 16, 4))
    text = "i am" + FS * 8100 + f" {first} Smith"
    assert len(text.encode()) <= 8192
    return text


def test_pinned_facts_bytes_are_bounded_not_just_their_count():
    """facts.py: the caps "keep the model input bounded whatever users type". The caps count
    facts (10 per kind per message, 300 in all), not bytes: _NAME's \\s+ and [a-z]+ are
    unbounded, and a fact stores the whole matched span as `verbatim`. 35 legal messages
    take the snapshot past Temporal's 2 MB payload limit (each 8 KB message adds ~49 KB
    for ever, since \\x1c is 1 byte in UTF-8 and 6 in JSON)."""
    state = ConversationState(conversation_id="bytes")
    for i in range(35):
        tr.receive_user_message(state, _name_message(i))
    snap = render_snapshot(state)
    size = len(snap.system) + len(snap.content)
    facts = [f for f in state.pinned_facts if f.kind == "name"]
    assert size < 1_000_000, (f"snapshot is {size} bytes after 35 legal messages; "
                              f"{len(facts)} name facts, verbatim {len(facts[0].verbatim)} chars each")


def test_one_name_fact_is_not_8_kb():
    facts = extract_facts("My name is " + "Ab" + "c" * 4000 + " " + "D" + "e" * 4000, 1)
    assert all(len(f.value) <= 200 and len(f.verbatim) <= 200 for f in facts), "a pinned fact of kilobytes"


# --- confirmation words: lookalikes / zero-width ------------------------------------


@pytest.mark.parametrize("text", [
    "yes\u200b", "\u200byes", "y\u0435s",  # zero-width space, Cyrillic 'е'
    "yes\u00a0but no", "ｙｅｓ but no", "yes\u2028no", "ok\u2026 no",
])
def test_lookalikes_and_zero_width_are_not_a_yes_held_up(text):
    assert not is_yes(text)


def test_yes_and_no_are_disjoint_held_up():
    from workflows.confirm import _AFFIRMATIVE, _NEGATIVE
    assert not (_AFFIRMATIVE & _NEGATIVE)
    assert not is_no("yes") and not is_yes("no")


# --- identity -----------------------------------------------------------------------


def _lookup_verdict(state, email):
    action = parse_proposed_action({"kind": "tool_call",
                                    "tool": {"name": "find_user_id_by_email", "arguments": {"email": email}}})
    return validate_proposal(state, action)


def test_email_only_in_an_assistant_turn_cannot_be_looked_up_held_up():
    state = ConversationState(conversation_id="id")
    tr.receive_user_message(state, "hi, I need help with an order")
    tr.add_turn(state, Role.ASSISTANT, f"Is your email {EMAIL}?")
    tr.receive_user_message(state, "yes")
    assert not _lookup_verdict(state, EMAIL).accepted


def test_second_identity_after_authentication_refused_held_up():
    state = authenticated()
    tr.receive_user_message(state, "my friend's email is yusuf.rossi7301@example.com")
    verdict = _lookup_verdict(state, "yusuf.rossi7301@example.com")
    assert not verdict.accepted and verdict.rule.value == "one-customer"
    assert state.customer.user_id == CUSTOMER


def test_model_invented_name_zip_refused_held_up():
    state = fresh()
    tr.receive_user_message(state, "I'm Raj Sanchez")
    call = make_tool_call("find_user_id_by_name_zip", {"first_name": "Raj", "last_name": "Sanchez", "zip": "19122"})
    assert not validate_proposal(state, parse_proposed_action({"kind": "tool_call", "tool": call.model_dump()})).accepted


def test_email_stated_after_300_facts_can_still_authenticate():
    """README: "Authentication lookups must use the email ... that the user stated". Once
    MAX_PINNED_FACTS (300) is reached (5 short messages full of ids do it), a stated email
    is no longer pinned, so the lookup of the email the user did state is refused for ever."""
    state = ConversationState(conversation_id="cap")
    for m in range(5):
        parts = [f"#W{m}{i:06d} {m}{i:09d} {m}{i:04d} credit_card_{m}{i}" for i in range(10)]
        parts += [f"u{m}{i}@x.com aa_bb_{m}{i:03d}" for i in range(10)]
        tr.receive_user_message(state, " ".join(parts))
    assert len(state.pinned_facts) == 300
    tr.receive_user_message(state, f"Sorry for the noise. My email is {EMAIL}")
    verdict = _lookup_verdict(state, EMAIL)
    assert verdict.accepted, f"{verdict.rule}: {verdict.reason}"


# --- refund safety: follow-up writes after a money write ------------------------------


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


def test_follow_up_writes_after_item_change_return_or_exchange_refused_held_up():
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
