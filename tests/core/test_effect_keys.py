"""Effect keys (``workflows.domain.keys``) come from business identity: the conversation, the
turn that proposed the write and its subject, never from a random id, so a re-executed
write gets the key it had the first time.

That they survive real workflow resets is tests/workflows/test_reset_outcomes.py.
"""

from __future__ import annotations

from tests.policy_fixtures import PENDING
from workflows.domain import keys
from workflows.domain.actions import make_tool_call

NEW_ADDRESS = {"address1": "1 Reset Road", "address2": "", "city": "Austin", "state": "TX",
               "country": "USA", "zip": "78701"}


def test_keys_are_derived_from_conversation_turn_and_subject():
    call = make_tool_call("modify_pending_order_address", {"order_id": PENDING, **NEW_ADDRESS})
    operation = keys.operation_id("conv-1", 2)
    assert keys.idempotency_key(call, operation) == f"modify_pending_order_address:{PENDING}:conv-1.t2"
    assert keys.escalation_ticket_key(keys.idempotency_key(call, operation)).startswith("escalate:modify_pending")
    assert keys.transfer_ticket_key("conv-1", 4) == "transfer:conv-1:t4"


def test_standalone_requests_of_two_stores_never_share_an_effect_key():
    """The same request id on the same order id in two stores (two tenants' systems, which
    number orders alike) is two writes: before, the operation was ``<request_id>.req`` alone,
    so the second store's cancel met the first's payments key and its refund never moved
    (answered as replayed), though it was reported applied."""
    from activities.payments_port import payments_key
    from workflows.refund.standalone import RefundRequest

    def write_key(store: str) -> str:
        request = RefundRequest(request_id="r-1", order_id=PENDING, operation="cancel", reason="no longer needed",
                                store=store)
        refund = request.refund_input()
        return keys.idempotency_key(refund.call, refund.operation_id)

    main, acme, other = write_key("main"), write_key("acme-eu"), write_key("acme.eu")
    assert main == f"cancel_pending_order:{PENDING}:r-1.req"  # the default store's keys are unchanged
    assert len({main, acme, other}) == 3
    assert len({payments_key(k) for k in (main, acme, other)}) == 3
    assert len({keys.email_key(k) for k in (main, acme, other)}) == 3
    assert all(keys.key_ref(k).standalone and keys.key_ref(k).subject == PENDING for k in (main, acme, other))


def test_the_longest_standalone_request_keys_fit_every_system():
    """With the store in the operation, the longest store, order and request id still give keys
    within the ledger's, outbox's and tickets' 256 characters."""
    from workflows.refund.standalone import RefundRequest

    request = RefundRequest(request_id="r" * 96, order_id="#" + "W" * 31, operation="exchange", store="s" * 64,
                            item_ids=["1"], new_item_ids=["2"], payment_method_id="gift_card_1")
    refund = request.refund_input()
    key = keys.idempotency_key(refund.call, refund.operation_id)
    assert max(len(keys.approval_expiry_ticket_key(key)), len(keys.escalation_ticket_key(key)),
               len(keys.email_key(key))) <= 256
