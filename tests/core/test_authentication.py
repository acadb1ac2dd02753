"""Authentication is bound to what the user typed: a lookup uses only an email, or a name
and zip, that the user stated in their own turn (not the assistant's, not the model's
invention), a second identity after authentication is refused, and the fact caps never
lock out the email the user states.

That the
workflow holds this against a model that looks up an identity on its own is
tests/workflows/test_authentication.py.
"""

from __future__ import annotations

from tests.policy_fixtures import CUSTOMER, EMAIL, authenticated, fresh
from workflows.domain import transitions as tr
from workflows.domain.actions import make_tool_call, parse_proposed_action
from workflows.domain.policy.validator import validate_proposal
from workflows.domain.state import ConversationState, Role


def _lookup_verdict(state, email):
    action = parse_proposed_action({"kind": "tool_call",
                                    "tool": {"name": "find_user_id_by_email", "arguments": {"email": email}}})
    return validate_proposal(state, action)


def test_email_only_in_an_assistant_turn_cannot_be_looked_up():
    state = ConversationState(conversation_id="id")
    tr.receive_user_message(state, "hi, I need help with an order")
    tr.add_turn(state, Role.ASSISTANT, f"Is your email {EMAIL}?")
    tr.receive_user_message(state, "yes")
    assert not _lookup_verdict(state, EMAIL).accepted


def test_second_identity_after_authentication_refused():
    state = authenticated()
    tr.receive_user_message(state, "my friend's email is yusuf.rossi7301@example.com")
    verdict = _lookup_verdict(state, "yusuf.rossi7301@example.com")
    assert not verdict.accepted and verdict.rule.value == "one-customer"
    assert state.customer.user_id == CUSTOMER


def test_model_invented_name_zip_refused():
    state = fresh()
    tr.receive_user_message(state, "I'm Raj Sanchez")
    call = make_tool_call("find_user_id_by_name_zip", {"first_name": "Raj", "last_name": "Sanchez", "zip": "19122"})
    assert not validate_proposal(state, parse_proposed_action({"kind": "tool_call", "tool": call.model_dump()})).accepted


def test_email_stated_after_300_facts_can_still_authenticate():
    """docs/concepts.md: "Authentication lookups must use the email ... that the user stated". Once
    MAX_PINNED_FACTS (300) is reached (5 short messages full of ids do it), a stated email
    must still be pinned, or the lookup of the email the user did state is refused for ever."""
    state = ConversationState(conversation_id="cap")
    for m in range(5):
        parts = [f"#W{m}{i:06d} {m}{i:09d} {m}{i:04d} credit_card_{m}{i}" for i in range(10)]
        parts += [f"u{m}{i}@x.com aa_bb_{m}{i:03d}" for i in range(10)]
        tr.receive_user_message(state, " ".join(parts))
    assert len(state.pinned_facts) == 300
    tr.receive_user_message(state, f"Sorry for the noise. My email is {EMAIL}")
    verdict = _lookup_verdict(state, EMAIL)
    assert verdict.accepted, f"{verdict.rule}: {verdict.reason}"
