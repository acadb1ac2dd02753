"""Effect keys (``workflows.keys``) come from business identity: the conversation, the
turn that proposed the write and its subject, never from a random id, so a re-executed
write gets the key it had the first time.

That they survive real workflow resets is tests/workflows/test_reset_outcomes.py.
"""

from __future__ import annotations

from tests.policy_fixtures import PENDING
from workflows import keys
from workflows.actions import make_tool_call

NEW_ADDRESS = {"address1": "1 Reset Road", "address2": "", "city": "Austin", "state": "TX",
               "country": "USA", "zip": "78701"}


def test_keys_are_derived_from_conversation_turn_and_subject():
    call = make_tool_call("modify_pending_order_address", {"order_id": PENDING, **NEW_ADDRESS})
    operation = keys.operation_id("conv-1", 2)
    assert keys.idempotency_key(call, operation) == f"modify_pending_order_address:{PENDING}:conv-1.t2"
    assert keys.escalation_ticket_key(keys.idempotency_key(call, operation)).startswith("escalate:modify_pending")
    assert keys.transfer_ticket_key("conv-1", 4) == "transfer:conv-1:t4"
