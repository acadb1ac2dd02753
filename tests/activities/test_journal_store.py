"""The journal store (``activities.store.journal``) on real SQLite and PostgreSQL: upserts
keyed by conversation/turn/seq are idempotent, a re-run turn replaces its rows, the
decision query filters and joins, JSON Lines export, transcript order, erasure and purge;
the journal's ids for erasure and retention (the conversations of a customer, including a
pseudonym the journal may hold instead of the id; the conversations whose newest row is older
than a cutoff; erasing a set of conversations whole, leaving the others as they were); and the
``record_turn`` activity's typed failures.
"""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.journal import JournalActivities
from activities.store.journal import JournalStore, ModelCallRecord
from tests.journal_fixtures import either_store  # noqa: F401 (either_store: the store fixture)
from workflows.domain.journal import EntryKind, Role, TranscriptRecord, TurnRecord, Verdict, VerdictRecord


T0 = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)


def call(cid="c1", turn=1, seq=1, customer="u1", proposal=None, at=T0, **extra) -> ModelCallRecord:
    return ModelCallRecord(conversation_id=cid, turn=turn, call_seq=seq, customer_id=customer,
                           prompt_version="p1", model="m1", view={"turn": turn, "seq": seq},
                           proposal=proposal, stop_reason="tool_use", input_tokens=10, output_tokens=2,
                           recorded_at=at, **extra)


def said(turn, seq, text, role=Role.ASSISTANT, kind=EntryKind.REPLY, message_id=None, at=T0) -> TranscriptRecord:
    return TranscriptRecord(turn=turn, seq=seq, role=role, kind=kind, text=text, message_id=message_id, at=at)


def verdict(turn, seq, v, rule=None, outcome=None, at=T0) -> VerdictRecord:
    return VerdictRecord(turn=turn, call_seq=seq, verdict=v, rule=rule, reason=rule and f"because {rule}",
                         outcome=outcome, at=at)


def count(store: JournalStore, table: str) -> int:
    with store.engine.connect() as conn:
        return conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar()


def test_model_call_upsert_overwrites_the_same_row(store):
    store.record_model_call(call(proposal=None))
    store.record_model_call(call(proposal={"kind": "reply", "text": "hi"}))  # a retried attempt
    [row] = store.decisions()
    assert row.proposal == {"kind": "reply", "text": "hi"} and row.view == {"turn": 1, "seq": 1}
    assert row.verdict is None and row.recorded_at == T0
    assert count(store, "model_calls") == 1


def test_record_turn_is_idempotent_and_joins_verdicts(store):
    store.record_model_call(call(seq=1))
    store.record_model_call(call(seq=2, proposal={"kind": "reply", "text": "done"}))
    record = TurnRecord(conversation_id="c1", customer_id="u1", turn=1, model_calls=2,
                        verdicts=[verdict(1, 1, Verdict.REJECTED, "check-status"), verdict(1, 2, Verdict.REPLIED)],
                        transcript=[said(1, 0, "hello", Role.USER, EntryKind.MESSAGE, "m-1"), said(1, 1, "done")])
    assert store.record_turn(record) == 0
    assert store.record_turn(record) == 0  # a retried activity
    assert (count(store, "verdicts"), count(store, "transcript")) == (2, 2)
    rows = store.decisions()
    assert [(r.call_seq, r.verdict, r.rule) for r in rows] == [(1, "rejected", "check-status"), (2, "replied", None)]
    assert rows[0].reason == "because check-status"


def test_a_later_stage_of_a_shown_write_settles_the_turns_last_call(store):
    store.record_model_call(call(turn=2, seq=1))
    store.record_model_call(call(turn=2, seq=2, proposal={"kind": "tool_call"}))
    store.record_turn(TurnRecord(conversation_id="c1", turn=2, model_calls=2, verdicts=[verdict(2, 2, Verdict.SHOWN)]))
    later = VerdictRecord(turn=2, call_seq=None, verdict=Verdict.EXECUTED, outcome="applied", at=T0)
    assert store.record_turn(TurnRecord(conversation_id="c1", turn=3, verdicts=[later])) == 0
    assert [(r.call_seq, r.verdict, r.outcome) for r in store.decisions()] == [(1, None, None),
                                                                               (2, "executed", "applied")]
    # a verdict naming a turn without any recorded call is skipped, not invented
    orphan = VerdictRecord(turn=9, verdict=Verdict.CANCELLED, at=T0)
    assert store.record_turn(TurnRecord(conversation_id="c1", verdicts=[orphan])) == 1
    assert count(store, "verdicts") == 1


def test_a_later_stage_in_the_same_record_settles_the_call_its_earlier_verdict_named(store):
    # the turn's call rows are missing (their writes failed): the earlier verdict of the same
    # record names the call, as a verdict written on its own would
    later = VerdictRecord(turn=3, call_seq=None, verdict=Verdict.CANCELLED, at=T0)
    record = TurnRecord(conversation_id="c1", turn=3, model_calls=3, verdicts=[verdict(3, 3, Verdict.SHOWN), later])
    assert store.record_turn(record) == 0
    with store.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT call_seq, verdict FROM verdicts")).all()
    assert [tuple(r) for r in rows] == [(3, "cancelled")]


def test_a_reply_call_and_the_turn_it_completes_are_one_transaction(store):
    turn = TurnRecord(conversation_id="c1", turn=1, model_calls=1, verdicts=[verdict(1, 1, Verdict.REPLIED)],
                      transcript=[said(1, 0, "hi", role=Role.USER, kind=EntryKind.MESSAGE), said(1, 1, "hello")])
    assert store.record_model_call(call(seq=1, proposal={"kind": "reply", "text": "hello"}), turn) == 0
    assert [(r.call_seq, r.verdict) for r in store.decisions()] == [(1, "replied")]
    assert [e.text for e in store.transcript("c1")] == ["hi", "hello"]
    # a turn part that fails takes the call's row with it: nothing is half written
    def refused(conn, record):
        raise sa.exc.OperationalError("INSERT ...", {}, Exception("connection lost"))
    store._record_turn = refused
    with pytest.raises(sa.exc.OperationalError):
        store.record_model_call(call(seq=2), turn.model_copy(update={"model_calls": 2}))
    assert [(r.call_seq, r.verdict) for r in store.decisions()] == [(1, "replied")]


def test_a_turn_re_run_by_a_reset_replaces_its_leftover_rows(store):
    for seq in (1, 2, 3):
        store.record_model_call(call(seq=seq))
    first = TurnRecord(conversation_id="c1", turn=1, model_calls=3,
                       verdicts=[verdict(1, s, Verdict.READ_RAN, outcome="applied") for s in (1, 2, 3)],
                       transcript=[said(1, 0, "hi", Role.USER, EntryKind.MESSAGE), said(1, 1, "a"), said(1, 2, "b")])
    store.record_turn(first)
    again = TurnRecord(conversation_id="c1", turn=1, model_calls=1, verdicts=[verdict(1, 1, Verdict.REPLIED)],
                       transcript=[said(1, 0, "hi", Role.USER, EntryKind.MESSAGE), said(1, 1, "only")])
    store.record_turn(again)
    assert [(r.call_seq, r.verdict) for r in store.decisions()] == [(1, "replied")]
    assert [e.text for e in store.transcript("c1")] == ["hi", "only"]


def test_decision_filters_combine(store):
    store.record_model_call(call("c1", 1, 1, customer="u1", at=T0))
    store.record_model_call(call("c2", 1, 1, customer="u2", at=T0 + timedelta(days=2)))
    store.record_model_call(call("c2", 2, 1, customer="u2", at=T0 + timedelta(days=3)))
    store.record_turn(TurnRecord(conversation_id="c2", turn=2, model_calls=1,
                                 verdicts=[verdict(2, 1, Verdict.REJECTED, "one-customer")]))
    assert {r.conversation_id for r in store.decisions(conversation_id="c1")} == {"c1"}
    assert [r.turn for r in store.decisions(customer_id="u2")] == [1, 2]
    assert [(r.conversation_id, r.turn) for r in store.decisions(rule="one-customer")] == [("c2", 2)]
    assert [r.turn for r in store.decisions(since=T0 + timedelta(days=1))] == [1, 2]
    naive = (T0 + timedelta(days=2, hours=1)).replace(tzinfo=None)  # naive is taken as UTC
    assert [r.turn for r in store.decisions(since=naive)] == [2]
    assert store.decisions(customer_id="u1", rule="one-customer") == []
    assert store.decisions(conversation_id="nobody") == []


def test_export_jsonl_writes_one_decision_row_per_line(store):
    store.record_model_call(call(seq=1, proposal={"kind": "reply", "text": "é"}))
    store.record_model_call(call(seq=2))
    out = io.StringIO()
    assert store.export_jsonl(out, conversation_id="c1") == 2
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["call_seq"] for line in lines] == [1, 2]
    assert lines[0]["proposal"] == {"kind": "reply", "text": "é"} and lines[0]["recorded_at"].startswith("2026-11-01")
    assert set(lines[0]) == {"conversation_id", "customer_id", "turn", "call_seq", "prompt_version", "model", "view",
                             "proposal", "stop_reason", "input_tokens", "output_tokens", "cache_read_input_tokens",
                             "cache_creation_input_tokens", "verdict", "rule", "reason",
                             "outcome", "recorded_at"}


def test_transcript_is_in_turn_and_entry_order(store):
    store.record_turn(TurnRecord(conversation_id="c1", turn=1, transcript=[
        said(1, 1, "first reply"), said(1, 0, "first", Role.USER, EntryKind.MESSAGE, "m-1")]))
    store.record_turn(TurnRecord(conversation_id="c1", turn=2, transcript=[
        said(2, 1, "second reply"), said(2, 0, "second", Role.USER, EntryKind.MESSAGE, "m-2")]))
    store.record_turn(TurnRecord(conversation_id="c1", transcript=[said(2, 2, "approved", kind=EntryKind.NOTICE)]))
    entries = store.transcript("c1")
    assert [(e.turn, e.seq, e.role, e.kind, e.text, e.message_id) for e in entries] == [
        (1, 0, "user", "message", "first", "m-1"), (1, 1, "assistant", "reply", "first reply", None),
        (2, 0, "user", "message", "second", "m-2"), (2, 1, "assistant", "reply", "second reply", None),
        (2, 2, "assistant", "notice", "approved", None)]
    assert entries[0].at == T0 and store.transcript("other") == []


def _conversation(store, cid, customer, at):
    store.record_model_call(call(cid, 1, 1, customer=customer, at=at))
    store.record_turn(TurnRecord(conversation_id=cid, customer_id=customer, turn=1, model_calls=1,
                                 verdicts=[verdict(1, 1, Verdict.REPLIED, at=at)],
                                 transcript=[said(1, 0, "hi", Role.USER, EntryKind.MESSAGE, at=at),
                                             said(1, 1, "hello", at=at)]))


def test_erase_conversation_and_customer(store):
    # a turn of c2 before authentication holds no customer id: erased with its conversation
    store.record_turn(TurnRecord(conversation_id="c2", turn=0, transcript=[said(0, 0, "my name is", Role.USER,
                                                                                 EntryKind.MESSAGE)]))
    _conversation(store, "c1", "u1", T0)
    _conversation(store, "c2", "u1", T0)
    _conversation(store, "c3", "u2", T0)
    erased = store.erase_conversation("c3")
    assert (erased.conversations, erased.model_calls, erased.verdicts, erased.transcript) == (1, 1, 1, 2)
    erased = store.erase_customer("u1")
    assert (erased.conversations, erased.model_calls, erased.verdicts, erased.transcript) == (2, 2, 2, 5)
    assert store.decisions() == [] and store.transcript("c2") == []
    assert store.erase_customer("u1").conversations == 0  # nothing left: no error


def test_purge_removes_whole_conversations_older_than_the_cutoff(store):
    _conversation(store, "old", "u1", T0)
    _conversation(store, "recent", "u1", T0 + timedelta(days=30))
    _conversation(store, "mixed", "u2", T0)
    # one fresh entry keeps the whole conversation (retention is per conversation)
    store.record_turn(TurnRecord(conversation_id="mixed", transcript=[said(1, 2, "later", at=T0 + timedelta(days=30))]))
    erased = store.purge(T0 + timedelta(days=10))
    assert erased.conversations == 1
    assert {r.conversation_id for r in store.decisions()} == {"recent", "mixed"}
    assert len(store.transcript("mixed")) == 3 and store.transcript("old") == []


def test_schema_creation_is_idempotent(store):
    _conversation(store, "c1", "u1", T0)
    url = store.engine.url.render_as_string(hide_password=False)
    again = JournalStore(url)  # another worker starting on the same database
    try:
        assert len(again.decisions()) == 1
    finally:
        again.close()


async def test_record_turn_activity_writes_and_types_its_failures(store):
    acts = JournalActivities(store)
    record = TurnRecord(conversation_id="c1", turn=1, transcript=[said(1, 0, "hi", Role.USER, EntryKind.MESSAGE)])
    assert await ActivityEnvironment().run(acts.record_turn, record) == 0
    assert [e.text for e in store.transcript("c1")] == ["hi"]
    if store.engine.dialect.name == "postgresql":
        # a value longer than its column: PostgreSQL refuses the data itself → non-retryable
        too_long = record.model_copy(update={"transcript": [said(1, 0, "hi", Role.USER, EntryKind.MESSAGE,
                                                                 message_id="m" * 1001)]})
        with pytest.raises(ApplicationError) as info:
            await ActivityEnvironment().run(acts.record_turn, too_long)
        assert info.value.type == "InvalidJournalRecord" and info.value.non_retryable
        assert "m" * 50 not in str(info.value)  # the data stays out of the error
    store.engine.dispose()
    broken = JournalActivities(store)
    broken.store.engine = sa.create_engine("postgresql+psycopg://postgres@127.0.0.1:1/none",
                                           connect_args={"connect_timeout": 1})
    with pytest.raises(ApplicationError) as info:
        await ActivityEnvironment().run(broken.record_turn, record)
    assert info.value.type == "JournalUnavailable" and not info.value.non_retryable


def test_recording_an_earlier_turn_again_drops_the_later_turns_of_the_discarded_timeline(store):
    """After a reset the workflow records turn 1 again: turns 2.. of the timeline the reset
    discarded go (transcript and verdicts); model calls stay until the new timeline reaches
    their turn (the next turn's calls may already be in when its predecessor is recorded)."""
    for turn in (1, 2):
        store.record_model_call(call(turn=turn, seq=1))
        store.record_turn(TurnRecord(conversation_id="c1", turn=turn, model_calls=1,
                                     verdicts=[verdict(turn, 1, Verdict.REPLIED)],
                                     transcript=[said(turn, 0, f"message {turn}", Role.USER, EntryKind.MESSAGE)]))
    store.record_turn(TurnRecord(conversation_id="c1", turn=1, model_calls=1, verdicts=[verdict(1, 1, Verdict.REPLIED)],
                                 transcript=[said(1, 0, "message 1 again", Role.USER, EntryKind.MESSAGE)]))
    assert [e.text for e in store.transcript("c1")] == ["message 1 again"]
    assert [(r.turn, r.verdict) for r in store.decisions(conversation_id="c1")] == [(1, "replied"), (2, None)]


# --- The journal's ids for erasure and retention ---

def _everything(journal: JournalStore) -> list:
    return [(r.conversation_id, r.turn, r.call_seq) for r in journal.decisions()] + [
        (cid, e.turn, e.seq, e.text) for cid in ("c1", "c2", "c3", "c4") for e in journal.transcript(cid)]


def test_ids_of_a_customer_and_of_stale_conversations(store):
    _conversation(store, "c1", "u1", T0)
    _conversation(store, "c2", "u1", T0 + timedelta(days=30))
    _conversation(store, "c3", "cust-0123456789abcdef0123", T0)
    store.record_turn(TurnRecord(conversation_id="c4", turn=0, transcript=[said(0, 0, "hi", Role.USER,
                                                                                 EntryKind.MESSAGE)]))
    assert store.conversations_of_customer("u1") == {"c1", "c2"}
    assert store.conversations_of_customer("cust-0123456789abcdef0123") == {"c3"}
    assert store.conversations_of_customer("u") == set()  # exact ids, not prefixes
    assert store.stale_conversations(T0 + timedelta(days=10)) == {"c1", "c3", "c4"}
    assert store.stale_conversations(T0) == set()  # strictly older


def test_erase_conversations_removes_exactly_those(store):
    for cid, customer in (("c1", "u1"), ("c2", "u1"), ("c3", "u2")):
        _conversation(store, cid, customer, T0)
    kept = [row for row in _everything(store) if row[0] == "c2"]
    erased = store.erase_conversations({"c1", "c3", "never-seen"})
    assert (erased.conversations, erased.model_calls, erased.verdicts, erased.transcript) == (2, 2, 2, 4)
    assert _everything(store) == kept
    assert store.erase_conversations(set()).conversations == 0 and _everything(store) == kept
