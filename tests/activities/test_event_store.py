"""The journal's events (``JournalStore``, SQLite and PostgreSQL): a record's events are numbered
from 1 in order; a record sent again (an activity retry, a replay, a continue-as-new) leaves the
events it already wrote as they were (id, sequence, time) and numbers only the new ones after
them; ``events(after=n)`` reads the later ones only; an event outlives a reset's trim of the
turn's rows; erasing the conversation (or its customer) removes its events, and so does a purge.
A refund's events (``refund_events``) are numbered per refund the same way, apart from a
conversation's of the same id; ``last_sequence`` names the highest held of each; a refund's events
go with the conversation that started it (erasure, purge, and a conversation's child refund
keeps it from being stale), with its customer, and by refund id; a backend's refund is stale once
its newest event is older than the cut-off; a re-sent batch changes nothing."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tests.journal_fixtures import either_store  # noqa: F401 (either_store: the store fixture)
from workflows.domain.journal import EventRecord, EventType, RefundEventsRecord, TurnRecord, event_id

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)


def event(key: str, kind: EventType, at: datetime = T0, **data) -> EventRecord:
    return EventRecord(key=key, type=kind, at=at, data={"conversation_id": "c1", **data})


def record(*events: EventRecord, turn=None) -> TurnRecord:
    return TurnRecord(conversation_id="c1", customer_id="u1", turn=turn, events=list(events))


def test_events_are_numbered_once_and_a_resent_record_changes_nothing(store):
    started = event("started", EventType.CONVERSATION_STARTED)
    replied = event("reply:0:1", EventType.CONVERSATION_REPLIED)
    store.record_turn(record(started, replied, turn=0))
    store.record_turn(record(started.model_copy(update={"at": T0 + timedelta(hours=1)}), replied, turn=0))
    first = store.events("c1")
    assert [(e.sequence, e.type, e.id, e.timestamp) for e in first] == [
        (1, "conversation.started", event_id("c1", "started"), T0),
        (2, "conversation.replied", event_id("c1", "reply:0:1"), T0)]

    store.record_turn(record(replied, event("ended:0", EventType.CONVERSATION_ENDED, status="ended")))
    assert [(e.sequence, e.type) for e in store.events("c1", after=2)] == [(3, "conversation.ended")]
    assert store.events("c1", after=3) == [] and store.events("other") == []
    assert store.events("c1")[:2] == first

    store.record_turn(record(turn=0))  # a reset re-running turn 0 trims its rows, not its events
    assert len(store.events("c1")) == 3


def test_erasure_and_purge_remove_a_conversations_events(store):
    store.record_turn(record(event("started", EventType.CONVERSATION_STARTED), turn=0))
    assert store.knows("c1") and store.conversations_of_customer("u1") == {"c1"}
    erased = store.erase_customer("u1")
    assert erased.events == 1 and erased.conversations == 1 and store.events("c1") == []

    store.record_turn(record(event("started", EventType.CONVERSATION_STARTED), turn=0))
    assert store.purge(T0 + timedelta(days=1)).events == 1 and store.events("c1") == []


def refund(refund_id: str, *keys: str, conversation_id=None, customer_id="u1", at: datetime = T0) -> RefundEventsRecord:
    return RefundEventsRecord(refund_id=refund_id, conversation_id=conversation_id, customer_id=customer_id, events=[
        EventRecord(key=k, type=EventType.REFUND_COMPLETED if k == "completed" else EventType.OPERATION_APPLIED,
                    at=at, data={"refund_id": refund_id}) for k in keys])


def test_a_refunds_events_are_numbered_per_refund_apart_from_a_conversation_of_the_same_id(store):
    store.record_turn(TurnRecord(conversation_id="r1", events=[
        EventRecord(key="started", type=EventType.CONVERSATION_STARTED, at=T0, data={"conversation_id": "r1"})]))
    store.record_refund_events(refund("r1", "op:x:operation.applied"))
    store.record_refund_events(refund("r1", "op:x:operation.applied", "completed"))  # re-sent, then one more
    assert [(e.sequence, e.type, e.id) for e in store.refund_events("r1")] == [
        (1, "operation.applied", event_id("r1", "op:x:operation.applied")),
        (2, "refund.completed", event_id("r1", "completed"))]
    assert [e.type for e in store.events("r1")] == ["conversation.started"]
    assert store.refund_events("r1", after=1)[0].type == "refund.completed"
    assert (store.last_sequence("refund", "r1"), store.last_sequence("conversation", "r1")) == (2, 1)
    assert store.last_sequence("refund", "nobody") == 0


def test_a_refunds_events_go_with_its_conversation_its_customer_or_its_id(store):
    store.record_turn(record(event("started", EventType.CONVERSATION_STARTED), turn=0))
    store.record_refund_events(refund("child", "completed", conversation_id="c1"))
    store.record_refund_events(refund("alone", "completed", customer_id="u2"))
    store.record_refund_events(refund("other", "completed", customer_id="u3"))
    assert store.erase_conversation("c1").refund_events == 1 and store.refund_events("child") == []
    assert store.erase_customer("u2").refund_events == 1 and store.refund_events("alone") == []
    assert store.erase_refunds(["other"]) == 1 and store.refund_events("other") == []

    # a conversation's child refund recorded late keeps the conversation from being stale
    store.record_turn(record(event("started", EventType.CONVERSATION_STARTED), turn=0))
    store.record_refund_events(refund("child", "completed", conversation_id="c1", at=T0 + timedelta(days=3)))
    assert store.stale_conversations(T0 + timedelta(days=1)) == set()
    purged = store.purge(T0 + timedelta(days=4))
    assert purged.events == 1 and purged.refund_events == 1 and store.refund_events("child") == []

    # a backend's refund is stale once its newest event is older; a conversation's never alone
    store.record_refund_events(refund("alone", "op:x:operation.applied", at=T0))
    store.record_refund_events(refund("alone", "completed", at=T0 + timedelta(days=2)))
    store.record_refund_events(refund("child", "completed", conversation_id="c9", at=T0))
    assert store.stale_refunds(T0 + timedelta(days=1)) == set()
    assert store.stale_refunds(T0 + timedelta(days=3)) == {"alone"}
