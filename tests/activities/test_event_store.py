"""The journal's events (``JournalStore``, SQLite and PostgreSQL): a record's events are numbered
from 1 in order; a record sent again (an activity retry, a replay, a continue-as-new) leaves the
events it already wrote as they were (id, sequence, time) and numbers only the new ones after
them; ``events(after=n)`` reads the later ones only; an event outlives a reset's trim of the
turn's rows; erasing the conversation (or its customer) removes its events, and so does a purge."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tests.journal_fixtures import either_store  # noqa: F401 (either_store: the store fixture)
from workflows.domain.journal import EventRecord, EventType, TurnRecord, event_id

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
