"""The longest id a conversation is started with (``NEW_CONVERSATION_ID_CHARS``) makes keys
that fit every system's bound: the retail ledger's, outbox's and tickets' key columns, the
email and ticketing services' references and the payments service's ``Idempotency-Key``.

A longer id, which the Python client used to take up to Temporal's bound, committed an
order's write and then failed where a key did not fit (a refund's money on a 300-character
payments key; on PostgreSQL, the ledger's 256-character column).
"""

from __future__ import annotations

from types import SimpleNamespace

from activities.payments_port import MAX_KEY_CHARS, payments_key, wire_key
from starter.client.refusals import NEW_CONVERSATION_ID_CHARS
from systems.email.service import messages
from systems.retail.schema import LedgerEntry, OutboxMessage, Ticket
from systems.ticketing.service import tickets
from workflows.domain import keys
from workflows.domain.catalogue import CATALOGUE

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
