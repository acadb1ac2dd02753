"""The journal CLI from the outside (real processes, a real SQLite journal): erasing a
conversation named ``support-…`` erases that one and no other, and a transcript never
passes terminal escape sequences to the operator. (From a review.)"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from activities.store.journal import JournalStore
from workflows.domain.journal import EntryKind, Role, TranscriptRecord, TurnRecord

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 1, tzinfo=timezone.utc)


def _journal(data: Path, conversations: dict[str, str]) -> None:
    store = JournalStore(f"sqlite:///{data / 'journal.sqlite'}")
    for cid, text in conversations.items():
        store.record_turn(TurnRecord(conversation_id=cid, customer_id=f"cust-{cid}", turn=1, transcript=[
            TranscriptRecord(turn=1, seq=0, role=Role.USER, kind=EntryKind.MESSAGE, text=text, at=NOW)]))
    store.close()


def _cli(data: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, STATEKEEPER_DATA_DIR=str(data), STATEKEEPER_DEV_STATE_FILE=str(data / "none.json"),
               COLUMNS="250")
    env.pop("STATEKEEPER_JOURNAL_URL", None)
    return subprocess.run([sys.executable, "-m", "starter.cli.app", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_erasing_a_conversation_named_support_something_erases_that_one(tmp_path):
    _journal(tmp_path, {"abc": "I am Alice", "support-abc": "I am Bob"})
    erased = _cli(tmp_path, "journal", "erase", "--conversation", "support-abc")
    assert erased.returncode == 0, erased.stderr
    store = JournalStore(f"sqlite:///{tmp_path / 'journal.sqlite'}")
    try:
        assert [e.text for e in store.transcript("abc")] == ["I am Alice"], "another conversation was erased"
        assert store.transcript("support-abc") == [], "the conversation asked for was left in place"
    finally:
        store.close()


def test_the_transcript_does_not_pass_terminal_escapes_to_the_operator(tmp_path):
    _journal(tmp_path, {"esc": "hello \x1b]0;owned\x07\x1b[2J\x1b[31mred"})
    shown = _cli(tmp_path, "transcript", "esc")
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout


def test_an_empty_filter_is_refused_not_read_as_no_filter(tmp_path):
    # adversarial review: `decisions --conversation "$CID" --jsonl out.jsonl` with CID unset
    # exported every conversation's model calls (their state views: names, emails, addresses)
    from activities.store.records import ModelCallRecord

    store = JournalStore(f"sqlite:///{tmp_path / 'journal.sqlite'}")
    for cid in ("alice-chat", "bob-chat"):
        store.record_model_call(ModelCallRecord(conversation_id=cid, turn=1, call_seq=1, customer_id=f"cust-{cid}",
                                                prompt_version="p1", model="m1", view={"email": f"{cid}@example.com"},
                                                proposal=None, stop_reason="tool_use", recorded_at=NOW))
    store.close()
    out = tmp_path / "out.jsonl"
    for option in ("--conversation", "--customer", "--rule"):
        for value in ("", "   "):
            refused = _cli(tmp_path, "decisions", option, value, "--jsonl", str(out))
            assert refused.returncode == 2, (option, value, refused.stdout, refused.stderr)
            assert refused.stderr.startswith(f"statekeeper: {option} is empty"), refused.stderr
            assert not out.exists() and "@example.com" not in refused.stdout
    one = _cli(tmp_path, "decisions", "--conversation", "alice-chat", "--jsonl", str(out))
    assert one.returncode == 0, one.stderr
    assert "alice-chat@" in out.read_text() and "bob-chat" not in out.read_text()


def test_a_blank_or_control_character_id_is_refused_before_anything_starts(tmp_path):
    """``state ""`` (an unset shell variable) started the embedded server and a worker, then
    said 'conversation  does not exist'; now state and transcript refuse it at once."""
    for args, said in ((("state", ""), "give a conversation id"), (("state", "   "), "give a conversation id"),
                       (("transcript", ""), "give a conversation id"),
                       (("state", "a\tb"), "control character"), (("transcript", "a\x1bb"), "control character")):
        refused = _cli(tmp_path, *args)
        assert refused.returncode == 2, (args, refused.stdout, refused.stderr)
        assert said in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "temporal.sqlite").exists() and not (tmp_path / "journal.sqlite").exists()


def test_an_empty_id_is_refused_not_reported_erased(tmp_path):
    """``journal erase --customer "$CUSTOMER"`` with the variable unset answered "erased 0
    conversation(s)", status 0: read as the customer's erasure done (``statekeeper erase`` and
    ``decisions`` refuse an empty id). (A new user's report.)"""
    _journal(tmp_path, {"keep": "I am Carol"})
    for option in ("--customer", "--conversation"):
        for empty in ("", "  "):
            refused = _cli(tmp_path, "journal", "erase", option, empty)
            assert refused.returncode == 2, (option, refused.stdout)
            assert f"statekeeper: {option} is empty" in refused.stderr and "erased" not in refused.stdout
    store = JournalStore(f"sqlite:///{tmp_path / 'journal.sqlite'}")
    try:
        assert [e.text for e in store.transcript("keep")] == ["I am Carol"]
    finally:
        store.close()
