"""Keys read back (``workflows.domain.keys.key_ref``): erasure and retention find a customer's or a
conversation's ledger rows, emails and tickets by what each key names, for every key the
workflows build, with conversation ids that contain the separators themselves."""

from __future__ import annotations

import pytest

from activities.erasure.runs import REFUND, SUPPORT, conversation_of
from tests.policy_fixtures import CUSTOMER, PENDING
from workflows.domain import keys
from workflows.domain.actions import make_tool_call
from workflows.domain.keys import KeyRef, key_ref
from workflows.refund.workflow import RefundWorkflow
from workflows.refund.standalone import RefundRequest
from workflows.conversation.workflow import SupportWorkflow

CANCEL = make_tool_call("cancel_pending_order", {"order_id": PENDING, "reason": "no longer needed"})
ADDRESS = make_tool_call("modify_user_address", {"user_id": CUSTOMER, "address1": "1 Road", "address2": "",
                                                 "city": "Austin", "state": "TX", "country": "USA", "zip": "78701"})


@pytest.mark.parametrize("conversation", ["conv-1", "a.t3", "odd:id.t", "x:t9", "tb-5ecdc6b1-1"])
def test_every_key_of_a_conversation_names_it(conversation):
    write = keys.idempotency_key(CANCEL, keys.operation_id(conversation, 12))
    undo = keys.idempotency_key(CANCEL, keys.compensation_operation(keys.operation_id(conversation, 3)))
    theirs = KeyRef(conversation=conversation, subject=PENDING)
    assert key_ref(write) == key_ref(undo) == theirs
    for wrapped in (keys.email_key(write), keys.escalation_ticket_key(write), keys.approval_expiry_ticket_key(write)):
        assert key_ref(wrapped) == theirs
    assert key_ref(keys.transfer_ticket_key(conversation, 7)) == KeyRef(conversation=conversation)
    assert key_ref(keys.rollback_ticket_key(conversation)) == KeyRef(conversation=conversation)
    address = keys.idempotency_key(ADDRESS, keys.operation_id(conversation, 2))
    assert key_ref(address) == KeyRef(conversation=conversation, subject=CUSTOMER)


def test_a_standalone_request_names_its_order_and_no_conversation():
    key = keys.idempotency_key(CANCEL, keys.standalone_operation_id("r-1"))
    assert key_ref(key) == KeyRef(subject=PENDING, standalone=True)
    assert key_ref(keys.email_key(key)) == key_ref(keys.approval_expiry_ticket_key(key)) == key_ref(key)


@pytest.mark.parametrize("key", ["", "weird", "a:b", "::", "transfer:", "transfer:c:tx", "rollback:",
                                 "cancel_pending_order:#W1:c.t٣", "cancel_pending_order:#W1:.t3"])
def test_other_keys_name_nothing(key):
    ref = key_ref(key)
    assert ref.conversation is None and not ref.standalone


def test_workflow_ids_and_types_of_erasure():
    assert conversation_of("support-a-b") == "a-b" and conversation_of("refund-main-W1-c.t2") is None
    assert conversation_of("support-") is None
    assert (SUPPORT, REFUND) == (SupportWorkflow.__temporal_workflow_definition.name,
                                 RefundWorkflow.__temporal_workflow_definition.name)


@pytest.mark.parametrize("store,order_id", [("main", "#W5500815"), ("eu.shop", "W1"), ("t-1", "#W2")])
def test_a_standalone_requests_records_name_the_start_of_its_refund_id(store, order_id):
    # retention keeps them while that refund runs, or closed after its cutoff
    request = RefundRequest(request_id="abc-1", order_id=order_id, operation="cancel", store=store,
                            reason="no longer needed")
    inp = request.refund_input()
    write = keys.idempotency_key(inp.call, inp.operation_id)
    for key in (write, keys.email_key(write), keys.escalation_ticket_key(write), keys.approval_expiry_ticket_key(write)):
        prefix = keys.standalone_refund_prefix(key, store)
        assert prefix is not None and request.refund_id().startswith(prefix), key
    conversation = keys.idempotency_key(CANCEL, keys.operation_id("conv-1", 2))
    assert keys.standalone_refund_prefix(conversation, "main") is None
    assert keys.standalone_refund_prefix(keys.transfer_ticket_key("conv-1", 2), "main") is None
