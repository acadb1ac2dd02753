"""Erasure and retention of the side records in the system of record (ledger, outbox,
tickets), on real SQLite and PostgreSQL (a database of the run's own): real writes through
the ledger, then ``activities.erasure.records`` finds a customer's or a conversation's
rows by their keys, owner and recipient, deletes them, anonymises a standalone request's
ledger row so it is still never applied twice, and leaves every other customer's rows and
the system's own profile and orders as they were."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from activities.erasure.records import conversation_records, customer_records, expired_request_records, forget
from systems.retail.backend import RetailBackend, make_engine
from systems.retail.erasure import ERASED_RESULT
from tests.journal_fixtures import postgres_database
from tests.policy_fixtures import CARD, CUSTOMER, DELIVERED, EMAIL, PENDING

OTHER, OTHER_EMAIL, OTHER_PENDING, OTHER_PENDING_2 = ("sofia_rossi_8776", "sofia.rossi2645@example.com",
                                                      "#W5918442", "#W5500815")
PERSONAL = (CUSTOMER, EMAIL, "Sanchez", "Sunset Drive", "92147", CARD)
NEW_ADDRESS = {"address1": "1 Erase Road", "address2": "", "city": "Austin", "state": "TX", "country": "USA",
               "zip": "78701"}


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request, tmp_path):
    if request.param == "sqlite":
        engine = make_engine(f"sqlite:///{tmp_path / 'sor.sqlite'}")
        yield _seeded(engine)
        engine.dispose()
        return
    with postgres_database() as url:
        engine = make_engine(url)
        yield _seeded(engine)
        engine.dispose()


def _seeded(engine) -> RetailBackend:
    backend = RetailBackend(engine)
    backend.create_schema()
    for store in ("main", "tb-1"):
        backend.seed_store(store)
    return backend


def cancel(order_id: str) -> tuple[str, dict]:
    return "cancel_pending_order", {"order_id": order_id, "reason": "no longer needed"}


def fill(backend: RetailBackend) -> dict[str, str]:
    """Real writes of the customer and of another one; returns the keys by name."""
    item = json.loads(backend.read("main", "get_order_details", {"order_id": DELIVERED}))["items"][0]["item_id"]
    k = {"cancel": f"cancel_pending_order:{PENDING}:ca.t2", "address": f"modify_user_address:{CUSTOMER}:ca.t4",
         "request": f"return_delivered_order_items:{DELIVERED}:r-1.req",
         "elsewhere": f"cancel_pending_order:{PENDING}:tb-conv.t2",
         "other": f"cancel_pending_order:{OTHER_PENDING}:cb.t2", "other_request": f"cancel_pending_order:{OTHER_PENDING_2}:r-9.req"}
    backend.write("main", *cancel(PENDING), k["cancel"])
    backend.write("main", "modify_user_address", {"user_id": CUSTOMER, **NEW_ADDRESS}, k["address"])
    backend.write("main", "return_delivered_order_items",
                  {"order_id": DELIVERED, "item_ids": [item], "payment_method_id": CARD}, k["request"])
    backend.write("tb-1", *cancel(PENDING), k["elsewhere"])
    backend.write("main", *cancel(OTHER_PENDING), k["other"])
    backend.write("main", *cancel(OTHER_PENDING_2), k["other_request"])
    for store, key, to in (("main", k["cancel"], EMAIL), ("main", k["request"], EMAIL),
                           ("tb-1", "newsletter-1", EMAIL.upper()), ("main", k["other"], OTHER_EMAIL)):
        backend.enqueue_email(store, f"email:{key}", to, "Your request", f"Dear customer, about {key}")
    backend.open_ticket("main", "transfer:ca:t3", CUSTOMER, "wants a human")
    backend.open_ticket("main", "transfer:pre:t1", None, "asked before signing in")  # theirs: conversation 'pre'
    backend.open_ticket("main", "transfer:cb:t3", OTHER, "wants a human too")
    return k


def side_rows(backend: RetailBackend) -> dict[str, list[dict]]:
    with backend.engine.connect() as conn:
        return {t: [dict(r._mapping) for r in conn.execute(sa.text(f"SELECT * FROM {t} ORDER BY store"))]
                for t in ("ledger", "outbox", "tickets")}


def of(rows: dict[str, list[dict]], *needles: str) -> list[dict]:
    return [r for table in rows.values() for r in table if any(n.lower() in json.dumps(r, default=str).lower()
                                                               for n in needles)]


def test_erasing_a_customer_removes_their_side_records_in_every_store(backend):
    keys = fill(backend)
    before = side_rows(backend)
    theirs_before = of(before, *PERSONAL)
    assert len(theirs_before) >= 8  # the scan sees them: it can fail
    others_before = of(before, OTHER, OTHER_EMAIL, OTHER_PENDING, OTHER_PENDING_2)

    counts = forget(backend, customer_records(backend, CUSTOMER, {"ca", "pre"}))
    assert counts.model_dump() == {"ledger_deleted": 3, "ledger_anonymised": 1, "outbox_deleted": 3,
                                   "tickets_deleted": 2}
    after = side_rows(backend)
    assert of(after, *PERSONAL) == []
    assert of(after, OTHER, OTHER_EMAIL, OTHER_PENDING, OTHER_PENDING_2) == others_before  # untouched
    assert {r["idempotency_key"] for r in after["ledger"]} == {keys["request"], keys["other"], keys["other_request"]}
    [anonymised] = [r for r in after["ledger"] if r["idempotency_key"] == keys["request"]]
    assert anonymised["result"] == ERASED_RESULT and anonymised["ok"]

    # the system's own records stay: the profile and the orders (with what the writes did)
    assert json.loads(backend.read("main", "get_user_details", {"user_id": CUSTOMER}))["email"] == EMAIL
    assert json.loads(backend.read("main", "get_order_details", {"order_id": PENDING}))["status"] == "cancelled"

    # the anonymised key still answers a resent request: recorded, never applied twice
    status = json.loads(backend.read("main", "get_order_details", {"order_id": DELIVERED}))["status"]
    item = json.loads(backend.read("main", "get_order_details", {"order_id": DELIVERED}))["items"][0]["item_id"]
    again = backend.write("main", "return_delivered_order_items",
                          {"order_id": DELIVERED, "item_ids": [item], "payment_method_id": CARD}, keys["request"])
    assert again.replayed and again.result == ERASED_RESULT
    assert json.loads(backend.read("main", "get_order_details", {"order_id": DELIVERED}))["status"] == status

    # a second erasure finds nothing left to change
    assert forget(backend, customer_records(backend, CUSTOMER, {"ca", "pre"})).model_dump() == dict.fromkeys(
        counts.model_dump(), 0)
    assert side_rows(backend) == after


def test_an_unknown_customer_erases_nothing(backend):
    fill(backend)
    before = side_rows(backend)
    assert customer_records(backend, "nobody_0000", {"no-such-conversation"}) == []
    assert forget(backend, []).model_dump() == dict.fromkeys(("ledger_deleted", "ledger_anonymised",
                                                              "outbox_deleted", "tickets_deleted"), 0)
    assert side_rows(backend) == before


def test_purging_conversations_removes_only_their_records(backend):
    keys = fill(backend)
    counts = forget(backend, conversation_records(backend, {"ca", "pre"}))
    assert counts.model_dump() == {"ledger_deleted": 2, "ledger_anonymised": 0, "outbox_deleted": 1,
                                   "tickets_deleted": 2}
    after = side_rows(backend)
    assert {r["idempotency_key"] for r in after["ledger"]} == {keys["request"], keys["elsewhere"], keys["other"],
                                                               keys["other_request"]}
    assert {r["ticket_key"] for r in after["tickets"]} == {"transfer:cb:t3"}


def test_expired_standalone_requests_are_anonymised_only_when_old(backend):
    keys = fill(backend)
    now = datetime.now(timezone.utc)
    assert expired_request_records(backend, now - timedelta(hours=1)) == []  # everything is newer
    with backend.engine.begin() as conn:  # one request (its ledger row and its email) is a year old
        for table, column, key in (("ledger", "idempotency_key", keys["request"]),
                                   ("outbox", "message_key", f"email:{keys['request']}")):
            conn.execute(sa.text(f"UPDATE {table} SET created_at = :at WHERE {column} = :key"),
                         {"at": now - timedelta(days=365), "key": key})
    old = expired_request_records(backend, now - timedelta(days=30))
    assert sorted((r.table, r.key) for r in old) == [("ledger", keys["request"]),
                                                      ("outbox", f"email:{keys['request']}")]
    assert forget(backend, old).model_dump() == {"ledger_deleted": 0, "ledger_anonymised": 1, "outbox_deleted": 1,
                                                 "tickets_deleted": 0}
    ledger = {r["idempotency_key"]: r["result"] for r in side_rows(backend)["ledger"]}
    assert ledger[keys["request"]] == ERASED_RESULT and ledger[keys["other_request"]] != ERASED_RESULT
