"""The webhooks' store and outbox (``activities.store.webhooks`` with ``JournalStore``, SQLite and
PostgreSQL): storing a record's new events enqueues, in the same transaction, one pending
delivery per event and per subscription of the record's tenant that takes its type (``*`` takes
every type; a record without a tenant is the default tenant's); a record sent again enqueues
nothing more; the journal's hook hears the enqueued deliveries after the commit; another
tenant's subscriptions, lists and deliveries are invisible; a delivery's target is the stored
event and the opened secret, which is kept sealed; deleting a webhook removes its deliveries;
erasing a conversation removes its deliveries; a refund's events are delivered to its tenant's
subscriptions too, from their own table, and go with its erasure; the sweep's view of unstarted
rows; a retry reopens a failed delivery."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import sqlalchemy as sa

from activities.store.webhooks import DeliveryStatus, SecretSeal, WebhookStore, webhooks
from tests.journal_fixtures import either_store  # noqa: F401 (either_store: the store fixture)
from workflows.domain.journal import EventRecord, EventType, RefundEventsRecord, TurnRecord, event_id

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)
KEYS = {"k1": b"\x07" * 32}


def record(cid: str, *keys_types: tuple[str, EventType], tenant=None) -> TurnRecord:
    return TurnRecord(conversation_id=cid, customer_id="u1", tenant=tenant, events=[
        EventRecord(key=key, type=kind, at=T0, data={"conversation_id": cid}) for key, kind in keys_types])


STARTED = ("started", EventType.CONVERSATION_STARTED)
APPLIED = ("op:c.t1:operation.applied", EventType.OPERATION_APPLIED)
ENDED = ("ended:1:0", EventType.CONVERSATION_ENDED)


def hooks_of(store) -> WebhookStore:
    return WebhookStore(store.engine.url.render_as_string(hide_password=False), SecretSeal(KEYS))


def test_new_events_enqueue_one_delivery_per_matching_subscription_of_their_tenant(store):
    hooks = hooks_of(store)
    every, _ = hooks.create("acme", "https://a.example/hook", ["*"])
    applied_only, _ = hooks.create("acme", "https://b.example/hook", ["operation.applied"])
    other, _ = hooks.create("globex", "https://c.example/hook", ["*"])
    default, _ = hooks.create("default", "https://d.example/hook", ["conversation.started"])
    heard: list = []
    store.on_deliveries = heard.append

    store.record_turn(record("c1", STARTED, APPLIED, tenant="acme"))
    assert sorted(heard[0]) == sorted([(every.webhook_id, event_id("c1", "started")),
                                       (every.webhook_id, event_id("c1", APPLIED[0])),
                                       (applied_only.webhook_id, event_id("c1", APPLIED[0]))])
    store.record_turn(record("c1", STARTED, APPLIED, ENDED, tenant="acme"))  # a retry plus one new event
    assert heard[1] == [(every.webhook_id, event_id("c1", ENDED[0]))]
    listed = hooks.deliveries("acme", every.webhook_id)
    assert sorted((d.sequence, d.event_type, d.status, d.attempts) for d in listed) == [
        (1, "conversation.started", DeliveryStatus.PENDING, 0), (2, "operation.applied", DeliveryStatus.PENDING, 0),
        (3, "conversation.ended", DeliveryStatus.PENDING, 0)]
    assert hooks.deliveries("acme", other.webhook_id) == [] and hooks.deliveries("globex", every.webhook_id) == []
    assert hooks.deliveries("globex", other.webhook_id) == []

    store.record_turn(record("c2", STARTED))  # no tenant: the default tenant's
    assert heard[2] == [(default.webhook_id, event_id("c2", "started"))]
    store.record_turn(record("c3", STARTED, tenant="initech"))  # a tenant without webhooks
    assert len(heard) == 3


def test_a_subscription_is_its_tenants_alone_and_its_secret_is_kept_sealed(store):
    hooks = hooks_of(store)
    made, secret = hooks.create("acme", "https://a.example/hook", ["*"], "orders backend")
    assert made.webhook_id.startswith("wh_") and secret.startswith("whsec_")
    assert [w.webhook_id for w in hooks.list("acme")] == [made.webhook_id] and hooks.list("globex") == []
    assert hooks.get("globex", made.webhook_id) is None and hooks.get("acme", made.webhook_id).description == \
        "orders backend"
    with hooks.engine.connect() as conn:
        stored = conn.execute(sa.select(webhooks.c.secret)).scalar_one()
    assert secret not in stored and stored.startswith("aesgcm:k1:")
    assert hooks.delete("globex", made.webhook_id) is False and hooks.get("acme", made.webhook_id) is not None

    store.record_turn(record("c1", STARTED, tenant="acme"))
    target = hooks.target(made.webhook_id, event_id("c1", "started"))
    assert target.secret == secret and target.sequence == 1 and target.event_type == "conversation.started"
    assert target.data == {"conversation_id": "c1"} and target.at == T0

    assert hooks.delete("acme", made.webhook_id) is True
    assert hooks.target(made.webhook_id, event_id("c1", "started")) is None  # its workflow stops: WebhookGone
    with hooks.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM webhook_deliveries")).scalar_one() == 0


def test_erasing_a_conversation_removes_its_deliveries(store):
    hooks = hooks_of(store)
    made, _ = hooks.create("default", "https://a.example/hook", ["*"])
    store.record_turn(record("c1", STARTED))
    store.record_turn(record("c2", STARTED))
    store.erase_conversation("c1")
    assert [d.conversation_id for d in hooks.deliveries("default", made.webhook_id)] == ["c2"]
    assert hooks.target(made.webhook_id, event_id("c1", "started")) is None


def test_a_refunds_events_reach_its_tenants_subscriptions_and_go_with_its_erasure(store):
    hooks = hooks_of(store)
    made, secret = hooks.create("acme", "https://a.example/hook", ["refund.completed"])
    heard: list = []
    store.on_deliveries = heard.append
    # the same id as a conversation's: a refund's events are its own stream
    store.record_turn(record("refund-main-W1-cancel", ("refund:done", EventType.REFUND_COMPLETED), tenant="acme"))
    completed = EventRecord(key="completed", type=EventType.REFUND_COMPLETED, at=T0,
                            data={"refund_id": "refund-main-W1-cancel", "status": "applied"})
    requested = EventRecord(key="approval", type=EventType.APPROVAL_REQUESTED, at=T0, data={})
    refund = RefundEventsRecord(refund_id="refund-main-W1-cancel", tenant="acme", events=[requested, completed])
    store.record_refund_events(refund)
    store.record_refund_events(refund)  # sent again: nothing more
    refund_event = event_id("refund-main-W1-cancel", "completed")
    assert heard[1:] == [[(made.webhook_id, refund_event)]]
    [delivery] = [d for d in hooks.deliveries("acme", made.webhook_id) if d.refund_id]
    assert (delivery.refund_id, delivery.conversation_id, delivery.sequence) == ("refund-main-W1-cancel", None, 2)
    target = hooks.target(made.webhook_id, refund_event)
    assert target.data == completed.data and target.sequence == 2 and target.secret == secret

    store.erase_refunds(["refund-main-W1-cancel"])
    assert [d.conversation_id for d in hooks.deliveries("acme", made.webhook_id)] == ["refund-main-W1-cancel"]
    assert hooks.target(made.webhook_id, refund_event) is None


def test_the_sweep_sees_unstarted_rows_and_a_retry_reopens_a_failed_delivery(store):
    hooks = hooks_of(store)
    made, _ = hooks.create("default", "https://a.example/hook", ["*"])
    store.record_turn(record("c1", STARTED, APPLIED))
    keys = hooks.unstarted()
    assert sorted(keys) == sorted([(made.webhook_id, event_id("c1", "started")),
                                   (made.webhook_id, event_id("c1", APPLIED[0]))])
    assert hooks.unstarted(older_than=timedelta(minutes=5)) == []  # too new for the sweep's grace
    hooks.started(keys[:1])
    assert hooks.unstarted() == keys[1:]

    webhook_id, evt = keys[0]
    hooks.attempted(webhook_id, evt, 500, "answered 500")
    hooks.attempted(webhook_id, evt, None, "no answer within 10 s")
    hooks.failed(webhook_id, evt)
    failed = hooks.delivery("default", webhook_id, evt)
    assert (failed.status, failed.attempts, failed.last_status_code, failed.last_error) == (
        DeliveryStatus.FAILED, 2, None, "no answer within 10 s")
    assert failed.finished_at is not None
    assert hooks.reopen("globex", webhook_id, evt) is None
    reopened = hooks.reopen("default", webhook_id, evt)
    assert reopened.status is DeliveryStatus.PENDING and reopened.attempts == 2 and reopened.finished_at is None
    hooks.attempted(webhook_id, evt, 204, None)
    done = hooks.delivery("default", webhook_id, evt)
    assert (done.status, done.attempts, done.last_status_code, done.last_error) == (
        DeliveryStatus.DELIVERED, 3, 204, None)
    assert [d.delivery_id for d in hooks.deliveries("default", webhook_id, DeliveryStatus.DELIVERED)] == [evt]
