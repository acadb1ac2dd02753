"""State-driven reads: which reads the state calls for before the model is asked, from the
current user message and what the state holds (``workflows.conversation.state_reads`` over the
catalogue's ``state_driven`` declarations), with their caps and the customer's scope."""

from __future__ import annotations

from workflows.conversation.state_reads import next_due_read
from workflows.domain import transitions as tr
from workflows.domain.actions import call_arguments
from workflows.domain.catalogue import CATALOGUE, STATE_DRIVEN
from workflows.domain.catalogue.state_reads import MAX_NAMED_ORDERS
from workflows.domain.state import ConversationState
from tests.policy_fixtures import CUSTOMER, DELIVERED, DELIVERED_2, EMAIL, PENDING, authenticated, other_customer_order, read


def _due(state: ConversationState) -> list[tuple[str, dict]]:
    """Every read the state calls for, in order, folding each one's benchmark result."""
    due = []
    for _ in range(20):
        call = next_due_read(state)
        if call is None:
            return due
        args = call_arguments(call)
        due.append((call.name, args))
        read(state, call.name, **args)
    raise AssertionError(f"the reads never stop: {due}")


def _said(text: str, state: ConversationState | None = None) -> ConversationState:
    state = state or ConversationState(conversation_id="state-reads")
    tr.receive_user_message(state, text)
    return state


def test_only_reads_declare_state_driven_reads_and_the_catalogue_lists_them_in_order():
    assert [spec.name for spec in STATE_DRIVEN] == [
        "find_user_id_by_email", "find_user_id_by_name_zip", "get_user_details", "get_order_details",
        "get_remembered_facts"]
    assert all(not spec.is_write for spec in CATALOGUE.values() if spec.state_driven is not None)


def test_an_email_in_the_message_reads_the_customer_then_their_profile_then_the_orders_it_names():
    state = _said(f"Hi, my email is {EMAIL}. What is the status of {PENDING} and {DELIVERED}?")
    assert _due(state) == [("find_user_id_by_email", {"email": EMAIL}), ("get_user_details", {"user_id": CUSTOMER}),
                           ("get_order_details", {"order_id": PENDING}), ("get_order_details", {"order_id": DELIVERED})]
    assert state.customer.details_loaded and set(state.orders) == {PENDING, DELIVERED}


def test_a_name_and_zip_in_the_message_read_the_customer():
    state = _said("Hi, I'm Raj Sanchez, my zip code is 92147")
    [(name, args), (profile, _)] = _due(state)
    assert (name, args) == ("find_user_id_by_name_zip", {"first_name": "Raj", "last_name": "Sanchez", "zip": "92147"})
    assert profile == "get_user_details" and state.customer.user_id == CUSTOMER


def test_a_message_without_facts_calls_for_nothing_and_an_earlier_message_is_not_read_again():
    state = _said("Hello, I need help")
    assert _due(state) == []
    state = authenticated(load_orders=False)
    _said(f"What about {PENDING}?", state)
    assert _due(state) == [("get_order_details", {"order_id": PENDING})]
    _said("And thanks", state)
    assert _due(state) == []  # the order named one message ago is loaded; nothing else is named


def test_an_unknown_email_is_looked_up_once_and_the_not_found_is_what_the_model_sees():
    state = _said("my email is nobody@example.com")
    assert next_due_read(state) is not None
    tr.apply_read_result(state, next_due_read(state), "Error: user not found")
    assert next_due_read(state) is None  # tried: never again, whatever the turn
    _said("are you there?", state)
    assert next_due_read(state) is None
    assert state.observations[-1].result == "Error: user not found"


def test_a_failed_read_is_not_run_again():
    state = _said(f"my email is {EMAIL}")
    call = next_due_read(state)
    tr.read_failed(state, call, "the order system could not be reached")
    assert next_due_read(state) is None and state.rejections[-1].rule == "tool-error"


def test_another_customers_order_and_wrong_shapes_are_never_read():
    other, _ = other_customer_order()
    state = authenticated(load_orders=False)
    _said(f"Status of {other}, W12345, #W45668090 and #w4566809?", state)
    assert _due(state) == []  # not theirs; a short id; a long id; a lower-case id


def test_fifty_order_ids_read_at_most_the_cap_and_only_the_customers_own():
    state = authenticated(load_orders=False)
    other, _ = other_customer_order()
    ids = [other] * 10 + [PENDING, DELIVERED, DELIVERED_2] + [f"#W{n:07d}" for n in range(47)]
    _said(" ".join(ids), state)
    due = _due(state)
    assert len(due) <= MAX_NAMED_ORDERS and {args["order_id"] for _, args in due} <= {PENDING, DELIVERED, DELIVERED_2}


def test_once_authenticated_no_other_identity_is_looked_up():
    state = authenticated(load_orders=False)
    _said("actually my email is someone.else@example.com", state)
    assert _due(state) == []


def test_an_email_glued_to_a_letter_of_another_script_is_no_email():
    state = _said("my email is \u0430raj.sanchez2046@example.com")  # a Cyrillic а before the address
    assert _due(state) == [] and state.customer is None
    assert [f.value for f in state.pinned_facts if f.kind == "email"] == []
    state = _said("write to m\u00fcller.anna@example.com")
    assert [f.value for f in state.pinned_facts if f.kind == "email"] == []  # not "ller.anna@example.com"


def test_a_batch_looks_one_identity_up_and_refuses_the_others():
    from workflows.conversation.batch import judge_batch
    from workflows.domain.actions import make_tool_call

    state = _said(f"my email is {EMAIL}, or try yusuf.rossi7301@example.com")
    calls = [make_tool_call("find_user_id_by_email", {"email": EMAIL}),
             make_tool_call("find_user_id_by_email", {"email": "yusuf.rossi7301@example.com"})]
    accepted, refused = judge_batch(state, calls)
    assert [call_arguments(c) for c in accepted] == [{"email": EMAIL}] and refused == 1
    assert state.rejections[-1].rule == "one-action" and "one identity lookup" in state.rejections[-1].reason
