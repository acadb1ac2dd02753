"""Which side records in the system of record (ledger rows, queued emails, tickets) belong
to a customer or to a set of conversations, and forgetting them.

Keys are read back with ``workflows.domain.keys.key_ref``. A ledger row of a conversation's
operation is deleted with the conversation (its id is never reused, and its workflows are
deleted with it, so nothing can replay the key); a ledger row of a backend's standalone
request (``….req``) is anonymised instead (``RecordErasure.anonymise_ledger``): the same
request sent again still finds its key and is never applied twice. Emails and tickets are
deleted. The customer's profile and orders are the system of record's own: never touched.
"""

from __future__ import annotations

from typing import AbstractSet, Iterable

from pydantic import BaseModel

from systems.retail.backend import RetailBackend
from systems.retail.erasure import SideRecord
from workflows.domain.keys import key_ref, standalone_refund_prefix

STANDALONE_FRAGMENT = ".req"
"""Every standalone request's operation ends so (``workflows.domain.keys.standalone_operation_id``)."""


class RecordCounts(BaseModel):
    """Side records removed: ledger rows deleted or anonymised, emails and tickets deleted."""

    ledger_deleted: int = 0
    ledger_anonymised: int = 0
    outbox_deleted: int = 0
    tickets_deleted: int = 0


def forget(backend: RetailBackend, records: Iterable[SideRecord]) -> RecordCounts:
    """Delete ``records``, except standalone requests' ledger rows, which are anonymised."""
    records = list(records)
    keep_key = [r for r in records if r.table == "ledger" and key_ref(r.key).standalone]
    kept = set(keep_key)
    deleted = backend.delete_records([r for r in records if r not in kept])
    return RecordCounts(ledger_deleted=deleted["ledger"], ledger_anonymised=backend.anonymise_ledger(keep_key),
                        outbox_deleted=deleted["outbox"], tickets_deleted=deleted["tickets"])


def customer_records(backend: RetailBackend, customer_id: str, conversations: set[str]) -> list[SideRecord]:
    """The side records of ``customer_id`` in every store: tickets opened for them, emails
    to their address, and rows whose key names one of their orders (in that store), their
    id, or one of ``conversations`` (theirs, including turns before they authenticated)."""
    footprint = backend.customer_footprint(customer_id)
    emails = {fp.email for fp in footprint.values() if fp.email}
    orders = {(store, order) for store, fp in footprint.items() for order in fp.order_ids}
    fragments = {customer_id, *conversations, *(order for _, order in orders)}

    def theirs(record: SideRecord) -> bool:
        if record.user_id == customer_id or (record.to_email or "").lower() in emails:
            return True
        ref = key_ref(record.key)
        return (ref.conversation in conversations or ref.subject == customer_id
                or (record.store, ref.subject) in orders)

    return [r for r in backend.side_records(fragments, user_id=customer_id, emails=emails) if theirs(r)]


def conversation_records(backend: RetailBackend, conversations: set[str]) -> list[SideRecord]:
    """The side records made by operations of ``conversations`` (writes, their emails,
    escalations, approval expiries, transfer and rollback tickets)."""
    return [r for r in backend.side_records(conversations) if key_ref(r.key).conversation in conversations]


def expired_request_records(backend: RetailBackend, older_than, keep: AbstractSet[str] = frozenset()
                            ) -> list[SideRecord]:
    """The side records of standalone requests created before ``older_than`` (aware datetime),
    except those of a refund whose workflow id is in ``keep`` (running, or closed since)."""
    def kept(record: SideRecord) -> bool:
        # a refund still running answers its retried write, or its look-up, from this very row:
        # anonymised under it, the refund was told "erased" and a cancel's money (read back
        # from the recorded order) never moved
        prefix = standalone_refund_prefix(record.key, record.store)
        return prefix is not None and any(w.startswith(prefix) for w in keep)

    return [r for r in backend.side_records([STANDALONE_FRAGMENT], before=older_than)
            if key_ref(r.key).standalone and not kept(r)]
