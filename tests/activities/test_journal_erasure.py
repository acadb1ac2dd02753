"""The journal's ids for erasure and retention, on real SQLite and PostgreSQL: the
conversations of a customer (including a pseudonym the journal may hold instead of the id),
the conversations whose newest row is older than a cutoff, and erasing a set of
conversations whole, leaving the others as they were."""

from __future__ import annotations

from datetime import timedelta

from activities.store.journal import JournalStore
from tests.activities.test_journal_store import T0, _conversation, said, store  # noqa: F401  (fixture)
from workflows.domain.journal import EntryKind, Role, TurnRecord


def _everything(journal: JournalStore) -> list:
    return [(r.conversation_id, r.turn, r.call_seq) for r in journal.decisions()] + [
        (cid, e.turn, e.seq, e.text) for cid in ("c1", "c2", "c3", "c4") for e in journal.transcript(cid)]


def test_ids_of_a_customer_and_of_stale_conversations(store):  # noqa: F811
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


def test_erase_conversations_removes_exactly_those(store):  # noqa: F811
    for cid, customer in (("c1", "u1"), ("c2", "u1"), ("c3", "u2")):
        _conversation(store, cid, customer, T0)
    kept = [row for row in _everything(store) if row[0] == "c2"]
    erased = store.erase_conversations({"c1", "c3", "never-seen"})
    assert (erased.conversations, erased.model_calls, erased.verdicts, erased.transcript) == (2, 2, 2, 4)
    assert _everything(store) == kept
    assert store.erase_conversations(set()).conversations == 0 and _everything(store) == kept
