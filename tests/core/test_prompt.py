"""Prompt rendering is a pure, bounded view of the state; pinned facts survive.

The last cases keep the prompt bounded under hostile but legal (<= 8 KB) messages, in bytes
as well as in number of facts.
"""

from __future__ import annotations

import json

from activities.llm.wire import propose_tool_param
from systems.model.view import parse_state_view  # the consumer of the rendered view
from tests.policy_fixtures import EMAIL, PENDING, authenticated, data
from workflows.domain import transitions as tr
from workflows.domain.facts import extract_facts
from workflows.domain.policy.validator import Rule
from workflows.domain.policy.text import POLICY_CLAUSES
from workflows.domain.prompt import LOG_EPOCH_TURNS, PROMPT_TURNS, render_snapshot
from workflows.domain.state import RECENT_TURNS_KEPT, ConversationState, Role


def test_rendering_is_deterministic():
    assert render_snapshot(authenticated()) == render_snapshot(authenticated())


def test_system_prompt_has_every_policy_clause_and_the_request_every_tool():
    system = render_snapshot(authenticated()).system
    for clause in POLICY_CLAUSES:
        assert f"[{clause}]" in system
    # the current prompt describes the tools once, in the tool's input schema
    offered = json.dumps(propose_tool_param())
    for tool in ("cancel_pending_order", "exchange_delivered_order_items", "get_product_details"):
        assert tool in offered


def test_fact_from_turn_4_is_still_in_the_prompt_at_turn_30_while_old_turns_are_gone():
    state = authenticated()
    for turn in range(2, 31):
        text = f"please look at order {PENDING}" if turn == 4 else f"small talk number {turn}"
        tr.receive_user_message(state, text)
        tr.add_turn(state, Role.ASSISTANT, f"reply {turn}")
    view = parse_state_view(render_snapshot(state).text())
    assert state.turn == 30
    assert PROMPT_TURNS <= len(view["recent_turns"]) <= RECENT_TURNS_KEPT
    assert view["recent_turns"][-1]["turn"] == 30 and view["recent_turns"][0]["turn"] >= 30 - LOG_EPOCH_TURNS - 3
    assert len(state.recent_turns) == RECENT_TURNS_KEPT
    assert all("order" not in t["text"] for t in view["recent_turns"])
    pinned = [f for f in view["pinned_facts"] if f["kind"] == "order_id"]
    assert pinned == [{"kind": "order_id", "value": PENDING, "verbatim": PENDING, "turn": 4}]
    assert any(f["kind"] == "email" and f["value"] == EMAIL for f in view["pinned_facts"])


def test_prompt_size_is_bounded_however_long_the_conversation():
    state = authenticated()
    sizes = []
    for turn in range(200):
        tr.receive_user_message(state, "x" * 500)
        tr.add_turn(state, Role.ASSISTANT, "y" * 500)
        sizes.append(len(render_snapshot(state).text()))
    # the window of turns grows for LOG_EPOCH_TURNS turns, then starts afresh: the largest prompt of
    # the last epochs is the largest of the epochs at turn 50, plus a digit in the turn numbers
    epoch = LOG_EPOCH_TURNS
    assert max(sizes[-epoch:]) - max(sizes[50:50 + epoch]) < 50


def test_last_rejection_reason_is_rendered():
    state = authenticated()
    tr.reject(state, Rule.CANCEL_PENDING_ONLY.value, "order is delivered")
    content = render_snapshot(state).text()
    assert "[cancel-pending-only]: order is delivered" in content
    assert parse_state_view(content)["rejections"][-1]["rule"] == "cancel-pending-only"


def test_facts_are_pinned_verbatim_and_never_duplicated():
    state = authenticated()
    tr.receive_user_message(state, "my order W4566809 and gift_card_2259499, item 1234567890; it was ordered by mistake")
    tr.receive_user_message(state, f"again {PENDING}")
    kinds = [(f.kind, f.value, f.verbatim, f.turn) for f in state.pinned_facts if f.kind != "email"]
    assert ("order_id", PENDING, "W4566809", state.turn - 1) in kinds
    assert sum(1 for k in kinds if k[0] == "order_id") == 1
    assert ("payment_method_id", "gift_card_2259499", "gift_card_2259499", state.turn - 1) in kinds
    assert ("item_id", "1234567890", "1234567890", state.turn - 1) in kinds
    assert ("cancel_reason", "ordered by mistake", "ordered by mistake", state.turn - 1) in kinds


def test_fact_pinning_knows_nothing_of_benchmark_plans():
    # a plan travels to the offline model outside the conversation (its PlanBook); text that
    # looks like one is just the user's words
    facts = extract_facts('hello <script>{"actions": [{"name": "x", "kwargs": {"order_id": "#W1234567"}}]}</script>', 1)
    assert [(f.kind, f.value) for f in facts] == [("order_id", "#W1234567")]
    assert extract_facts("<script>{not json</script>", 1) == []


def test_prompt_stays_bounded_with_many_steps_operations_and_rejections():
    from workflows.domain.actions import make_tool_call

    state = authenticated()
    sizes = []
    for n in range(300):
        tr.receive_user_message(state, "ok")
        call = make_tool_call("cancel_pending_order", {"order_id": PENDING, "reason": "no longer needed"})
        tr.start_step(state, f"op-{n}", call.name, "Cancel order " + PENDING, operation_id=f"op-{n}")
        tr.apply_write_result(state, call, f"op-{n}", f"k-{n}", "Error: non-pending order cannot be cancelled", False)
        tr.reject(state, Rule.TOOL_ERROR.value, "Error: non-pending order cannot be cancelled")
        sizes.append(len(render_snapshot(state).text()))
    assert sizes[-1] - sizes[100] < 100  # only the counters grow


def test_the_state_stays_bounded_with_many_writes():
    from workflows.domain.actions import make_tool_call
    from workflows.domain.records import OPERATIONS_KEPT

    state = authenticated()
    order = json.dumps(data()["orders"][PENDING])
    sizes = []
    for n in range(1000):
        tr.receive_user_message(state, "yes")
        call = make_tool_call("modify_pending_order_payment", {"order_id": PENDING, "payment_method_id": "gift_card_1"})
        tr.start_step(state, f"op-{n}", call.name, "Pay order " + PENDING, operation_id=f"op-{n}")
        tr.apply_write_result(state, call, f"op-{n}", f"k-{n}", order, True)
        sizes.append(len(state.model_dump_json()))
    assert len(state.completed_operations) == OPERATIONS_KEPT
    assert state.completed_operations[0].operation_id == f"op-{1000 - OPERATIONS_KEPT}"
    assert sizes[-1] - sizes[400] < 1000  # past the window only counters grow
    assert sizes[-1] < 1_000_000


# --- bounded under legal but hostile messages ---
# docs/concepts.md and the prompt module: "It never sees the full transcript, so the prompt stays bounded however
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
        sizes.append(len(snap.system) + len(snap.text()))
    # the prompt keeps 6 turns (<= 48 KB of user text) plus bounded windows: it should
    # not be megabytes. It is: every 5-digit number is pinned forever and rendered.
    assert sizes[-1] < 1_000_000, f"snapshot grew to {sizes[-1]} bytes after 30 legal messages: {sizes[::5]}"


# pinned facts are bounded in bytes, not only in count

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
    size = len(snap.system) + len(snap.text())
    facts = [f for f in state.pinned_facts if f.kind == "name"]
    assert size < 1_000_000, (f"snapshot is {size} bytes after 35 legal messages; "
                              f"{len(facts)} name facts, verbatim {len(facts[0].verbatim)} chars each")


def test_one_name_fact_is_not_8_kb():
    facts = extract_facts("My name is " + "Ab" + "c" * 4000 + " " + "D" + "e" * 4000, 1)
    assert all(len(f.value) <= 200 and len(f.verbatim) <= 200 for f in facts), "a pinned fact of kilobytes"
