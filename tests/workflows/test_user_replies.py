"""Users never see internal identifiers, exception names or parser text.

Each case drives a real conversation (real Temporal server, worker, SQLite system of
record) with a test brain that misbehaves at the model boundary, and checks the reply
the user gets against what must never reach them; the technical reason must still be
in the state, where the model and operators read it.
"""

from __future__ import annotations

import re

from tests.policy_fixtures import CUSTOMER, EMAIL, other_customer_order
from tests.workflow_harness import running_worker
from workflows.domain.catalogue import CATALOGUE

INTERNAL = [
    re.compile(r"\b[a-z]+_[a-z]+_\d{4}\b"),  # user ids
    re.compile(r"\b(Malformed|ModelRequest|ModelUnavailable|ValidationError|ApplicationError|ActivityError)"),
    re.compile(r"\bpropose_action\b|\bProposedAction\b|Traceback|\bError:"),
    re.compile(r"\((?:[A-Z][a-z]+){2,}\)"),  # "(SomeError)"
    re.compile("|".join(rf"\b{name}\b" for name in CATALOGUE)),
]


def assert_plain(text: str) -> None:
    for pattern in INTERNAL:
        assert not pattern.search(text), f"{pattern.pattern!r} leaked into the reply: {text!r}"


async def test_invalid_model_output_gets_a_plain_apology(temporal_env, settings):
    def broken(view: dict, plan: dict | None = None) -> dict:
        return {"kind": "tool_call", "tool": {"name": "get_order_details", "arguments": {"order": 1}}}

    async with running_worker(temporal_env, settings, brain=broken) as (client, _):
        cid = await client.start_conversation("replies-malformed")
        reply = await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert_plain(reply.text)
        assert reply.text.startswith("Sorry")
        state = await client.state(cid)
        last = state.last_rejection()
        assert last.rule == "malformed-model-output" and "not one valid proposal" in last.reason
        assert "MalformedModelOutput" not in last.reason  # no exception names, even for the model


async def test_repeated_policy_refusal_names_the_clause_not_the_ids(temporal_env, settings):
    _, other_user = other_customer_order()

    def nosy(view: dict, plan: dict | None = None) -> dict:
        if view["customer"] is None:
            return {"kind": "tool_call", "tool": {"name": "find_user_id_by_email", "arguments": {"email": EMAIL}}}
        return {"kind": "tool_call", "tool": {"name": "get_user_details", "arguments": {"user_id": other_user}}}

    async with running_worker(temporal_env, settings, brain=nosy) as (client, _):
        cid = await client.start_conversation("replies-policy")
        reply = await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert_plain(reply.text)
        assert "only help with the account you identified yourself with" in reply.text
        state = await client.state(cid)
        assert state.customer.user_id == CUSTOMER
        assert state.last_rejection().rule == "one-customer" and other_user in state.last_rejection().reason


async def test_address_confirmation_names_no_user_id(temporal_env, settings):
    def address(view: dict, plan: dict | None = None) -> dict:
        if view["customer"] is None:
            return {"kind": "tool_call", "tool": {"name": "find_user_id_by_email", "arguments": {"email": EMAIL}}}
        return {"kind": "tool_call", "tool": {"name": "modify_user_address", "arguments": {
            "user_id": CUSTOMER, "address1": "1 Main St", "address2": "", "city": "Austin", "state": "TX",
            "country": "USA", "zip": "78701"}}}

    async with running_worker(temporal_env, settings, brain=address) as (client, _):
        cid = await client.start_conversation("replies-address")
        reply = await client.send_message(cid, f"Hi, my email is {EMAIL}, please change my address")
        assert reply.awaiting_confirmation
        assert_plain(reply.text)
        assert "Change your default address to: 1 Main St, Austin, TX, 78701, USA." in reply.text
