"""Effect keys (``workflows.domain.keys``):

- they come from business identity: the conversation, the turn that proposed the write and its
  subject, never from a random id, so a re-executed write gets the key it had the first time;
- they are read back (``key_ref``): erasure and retention find a customer's or a conversation's
  ledger rows, emails and tickets by what each key names, for every key the workflows build,
  with conversation ids that contain the separators themselves;
- the longest id a conversation is started with (``NEW_CONVERSATION_ID_CHARS``) makes keys that
  fit every system's bound: the retail ledger's, outbox's and tickets' key columns, the email and
  ticketing services' references and the payments service's ``Idempotency-Key``. A longer id
  would commit an order's write and then fail where a key does not fit (a refund's money on a
  300-character payments key; on PostgreSQL, the ledger's 256-character column).

That keys survive real workflow resets is tests/workflows/test_reset_outcomes.py.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from activities.erasure.runs import REFUND, SUPPORT, conversation_of
from activities.payments_port import MAX_KEY_CHARS, payments_key, wire_key
from starter.client.refusals import NEW_CONVERSATION_ID_CHARS
from systems.email.service import messages
from systems.retail.schema import LedgerEntry, OutboxMessage, Ticket
from systems.ticketing.service import tickets
from tests.policy_fixtures import PENDING, CUSTOMER
from workflows.conversation.workflow import SupportWorkflow
from workflows.domain import keys
from workflows.domain.actions import make_tool_call
from workflows.domain.catalogue import CATALOGUE
from workflows.domain.keys import KeyRef, key_ref
from workflows.refund.standalone import RefundRequest
from workflows.refund.workflow import RefundWorkflow


# --- Keys from business identity ---

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
    number orders alike) is two writes: were the operation ``<request_id>.req`` alone, the
    second store's cancel would meet the first's payments key and its refund would never move
    (answered as replayed), though reported applied."""
    from activities.payments_port import payments_key
    from workflows.refund.standalone import RefundRequest

    def write_key(store: str) -> str:
        request = RefundRequest(request_id="r-1", order_id=PENDING, operation="cancel", reason="no longer needed",
                                store=store)
        refund = request.refund_input()
        return keys.idempotency_key(refund.call, refund.operation_id)

    main, acme, other = write_key("main"), write_key("acme-eu"), write_key("acme.eu")
    assert main == f"cancel_pending_order:{PENDING}:r-1.req"  # the default store's keys name no store
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


# --- Keys read back ---

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


# --- Keys within every system's bound ---

LONGEST_TURN = 999_999
SUBJECTS = {"order_id": "#W" + "9" * 14, "user_id": "u" * 32}
"""Longer than any τ-bench order id (9 characters) or user id (23)."""


def _write_keys(conversation_id: str) -> list[str]:
    operation = keys.operation_id(conversation_id, LONGEST_TURN)
    found = []
    for spec in CATALOGUE.values():
        if not spec.is_write:
            continue
        call = SimpleNamespace(name=spec.name, arguments=SimpleNamespace(**{spec.subject: SUBJECTS[spec.subject]})
                               if spec.subject else SimpleNamespace())
        found += [keys.idempotency_key(call, operation),
                  keys.idempotency_key(call, keys.compensation_operation(operation))]
    return found


def test_every_key_of_the_longest_conversation_id_fits_every_systems_bound():
    cid = "é" * NEW_CONVERSATION_ID_CHARS  # characters, not bytes, are what the bounds count
    ledger = LedgerEntry.__table__.c.idempotency_key.type.length
    outbox = OutboxMessage.__table__.c.message_key.type.length
    retail_tickets = Ticket.__table__.c.ticket_key.type.length
    references = min(messages.c.reference.type.length, tickets.c.reference.type.length)
    write_keys = _write_keys(cid)
    assert write_keys and max(map(len, write_keys)) <= ledger
    wrapped = [f(k) for k in write_keys for f in (keys.email_key, keys.escalation_ticket_key,
                                                 keys.approval_expiry_ticket_key)]
    wrapped += [keys.transfer_ticket_key(cid, LONGEST_TURN), keys.rollback_ticket_key(cid)]
    assert max(map(len, wrapped)) <= min(outbox, retail_tickets, references)
    for key in write_keys:  # sent whole or as its digest, within the service's bound either way
        assert len(wire_key(payments_key(key))) <= MAX_KEY_CHARS
    ascii_keys = _write_keys("c" * NEW_CONVERSATION_ID_CHARS)
    assert all(payments_key(k) == f"pay:{k}" for k in ascii_keys)  # readable: sent whole
