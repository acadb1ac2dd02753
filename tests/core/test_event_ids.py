"""Event identity and numbering (``workflows.domain.journal``, pure): an event's id is a digest
of its conversation and its business key, the same for the same fact and different otherwise;
sequence numbers continue after the highest known one, from 1, without gaps, and a key already
known (a re-sent record: an activity retry, a replay, a continue-as-new) keeps its number; the
keys name the fact, not the run (a new run's ``conversation.started`` has the first run's key);
a reply has the same event whether the workflow or the model activity (``TurnRecord.with_reply``)
recorded it, so the record the activity wrote is still recognised as the turn's own, also past a
reset point (the reply's key carries the reset epoch on both paths); a ticket's id is a digest of
its key, never the key (which may name the customer)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from tests.policy_fixtures import CUSTOMER, authenticated
from workflows.conversation.journal import JournalLog
from workflows.domain import journal as ev
from workflows.domain import keys
from workflows.domain import transitions as tr
from workflows.domain.journal import EntryKind, EventType

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def clock():
    times = iter(T0 + timedelta(seconds=n) for n in range(1000))
    return lambda: next(times)


def test_an_event_id_is_the_digest_of_its_conversation_and_key():
    first = ev.event_id("conv-1", "started")
    assert re.fullmatch(r"evt_[0-9a-f]{24}", first)
    assert ev.event_id("conv-1", "started") == first
    assert ev.event_id("conv-2", "started") != first
    assert ev.event_id("conv-1", ev.ended_key(3, 0)) != first
    # the conversation id's length is in the digest: no id and key pair can pass for another
    assert ev.event_id("a|b", "c") != ev.event_id("a", "b|c")


def test_sequences_continue_after_the_known_ones_and_a_known_key_keeps_its_number():
    assert ev.assign_sequences({}, ["started", "reply:0:1"]) == [("started", 1), ("reply:0:1", 2)]
    known = {"started": 1, "reply:0:1": 2}
    assert ev.assign_sequences(known, ["started", "reply:0:1"]) == []  # a re-sent record adds nothing
    assert ev.assign_sequences(known, ["reply:0:1", "reply:1:1", "reply:1:1", "ended:1"]) == [
        ("reply:1:1", 3), ("ended:1", 4)]


def test_keys_name_the_fact():
    op = "conv-1.t2"
    assert ev.operation_key(op, EventType.OPERATION_APPLIED) == "op:conv-1.t2:operation.applied"
    assert ev.operation_key(op, EventType.CONFIRMATION_REQUESTED) != ev.operation_key(op, EventType.OPERATION_APPLIED)
    assert ev.approval_key("a~1", EventType.APPROVAL_DECIDED) == "approval:a~1:approval.decided"
    assert ev.reply_key(2, 1) != ev.reply_key(1, 2)
    assert ev.ended_key(3, 0) != ev.ended_key(3, 1)  # reopened by a resolution, it can end again
    assert len({t.value for t in EventType}) == len(EventType) == 16


def test_a_new_run_sends_the_same_started_event_and_a_reply_the_same_event_on_either_path():
    state = authenticated()
    first = JournalLog(state, clock())
    first.record(tr.RunStarted())
    first.user_message(state.turn, "hello", "msg-1")
    first.said("How can I help?")
    record = first.take(state)
    assert [(e.key, e.type) for e in record.events] == [
        ("started", EventType.CONVERSATION_STARTED),
        (ev.reply_key(state.turn, 1), EventType.CONVERSATION_REPLIED)]
    assert record.events[1].data == {"conversation_id": state.conversation_id, "turn": state.turn, "entry": 1,
                                     "kind": EntryKind.REPLY.value}

    again = JournalLog(state, clock())  # continue-as-new: a new run, no memory
    again.record(tr.RunStarted())
    again.user_message(state.turn + 1, "and then?", "msg-2")
    again.next_call()
    given = again.so_far(state)
    written = given.with_reply(1, "This.", T0)  # what the model activity writes with its reply
    again.call_verdict(ev.Verdict.REPLIED)
    again.said("This.")
    taken = again.take(state)
    assert taken.events[0].key == "started"
    assert written.same_rows(taken)
    assert [e.key for e in written.events] == [e.key for e in taken.events]


def test_a_reply_written_by_the_model_activity_past_a_reset_point_has_the_workflows_key():
    state = authenticated()
    tr.reset_seen(state, ev.reset_epoch(0x1234_5678_9ABC_DEF0))
    assert state.reset_epoch == "9abcdef0"
    log = JournalLog(state, clock())
    log.record(tr.RunStarted())
    log.user_message(state.turn, "and then?", "msg-2")
    log.next_call()
    written = log.so_far(state).with_reply(1, "This.", T0)
    log.call_verdict(ev.Verdict.REPLIED)
    log.said("This.")
    taken = log.take(state)
    assert [e.key for e in taken.events] == ["started", f"{ev.reply_key(state.turn, 1)}@9abcdef0"]
    assert written.same_rows(taken) and [e.key for e in written.events] == [e.key for e in taken.events]


def test_a_ticket_is_named_by_a_digest_of_its_key():
    key = keys.escalation_ticket_key(f"modify_user_address:{CUSTOMER}:conv-1.t2")
    ticket = ev.ticket_id(key)
    assert re.fullmatch(r"tkt_[0-9a-f]{16}", ticket) and ev.ticket_id(key) == ticket
    assert CUSTOMER not in ticket and ev.ticket_id(keys.transfer_ticket_key("conv-1", 2)) != ticket
    assert [ev.ticket_reason(k) for k in (key, keys.transfer_ticket_key("c", 1), keys.rollback_ticket_key("c"),
                                          keys.approval_expiry_ticket_key("k"), "other:1")] == [
        "escalation", "transfer", "rollback", "approval_expired", "other"]
    assert ev.with_epoch("started", "0a0b0c0d") == "started"  # a conversation starts once
    assert ev.with_epoch("ended:3:0", None) == "ended:3:0" and ev.with_epoch("ended:3:0", "0a") == "ended:3:0@0a"
