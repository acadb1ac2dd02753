"""The commands that need no Temporal server (keys, transcript, decisions, journal erase and
purge, migrate, backtest) as a user runs them, on a bad day: a journal database that is not
one, one migrated by a newer statekeeper, a data directory that is a file, an invalid
setting, an output file that cannot be written, a period too large for a date. Each is one
line on stderr and a non-zero status: no traceback, no exception class name, and the
database is left as it was. (Found by a hostile review: each printed a Python traceback.)"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from activities.store.journal import JournalStore
from workflows.domain.journal import EntryKind, Role, TranscriptRecord, TurnRecord

ROOT = Path(__file__).resolve().parents[2]
JOURNAL_COMMANDS = [
    ["keys", "list"],
    ["keys", "create", "--tenant", "t1", "--role", "service"],
    ["keys", "revoke", "k1"],
    ["transcript", "c1"],
    ["decisions"],
    ["journal", "erase", "--conversation", "c1"],
    ["journal", "purge", "--older-than-days", "30"],
    ["migrate"],
    ["backtest"],
]
CLASS_NAMES = ("Traceback", "Error:", "Error)", "Exception", "sqlalche.me")


def _cli(data: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = dict(os.environ, STATEKEEPER_DATA_DIR=str(data), STATEKEEPER_DEV_STATE_FILE=str(data) + ".dev.json",
                   COLUMNS="250", **env)
    environ.pop("STATEKEEPER_JOURNAL_URL", None)
    return subprocess.run([sys.executable, "-m", "starter.cli.app", *args], cwd=ROOT, env=environ, capture_output=True,
                          text=True, timeout=120)


def _refused_in_one_line(done: subprocess.CompletedProcess, says: str) -> None:
    assert done.returncode not in (0,), (done.stdout, done.stderr)
    assert not any(name in done.stderr for name in CLASS_NAMES), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert says in done.stderr, done.stderr


def _journal_with_one_conversation(data: Path) -> Path:
    data.mkdir(parents=True, exist_ok=True)
    store = JournalStore(f"sqlite:///{data / 'journal.sqlite'}")
    from datetime import datetime, timezone
    store.record_turn(TurnRecord(conversation_id="c1", customer_id="cust-c1", turn=1, transcript=[
        TranscriptRecord(turn=1, seq=0, role=Role.USER, kind=EntryKind.MESSAGE, text="hello",
                         at=datetime(2026, 11, 1, tzinfo=timezone.utc))]))
    store.close()
    return data / "journal.sqlite"


def _update(journal: Path, sql: str) -> None:
    conn = sqlite3.connect(journal)
    try:
        with conn:
            conn.execute(sql)
    finally:
        conn.close()


def _contents(journal: Path) -> dict[str, list]:
    """Every table's rows (the file's bytes change when SQLite checkpoints its WAL)."""
    conn = sqlite3.connect(journal)
    try:
        tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: sorted(map(repr, conn.execute(f'SELECT * FROM "{t}"'))) for t in sorted(tables)}
    finally:
        conn.close()


@pytest.mark.parametrize("args", JOURNAL_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_journal_file_that_is_not_a_database_is_one_line_and_left_alone(tmp_path, args):
    tmp_path.joinpath("journal.sqlite").write_bytes(b"these are my notes, not a database\n" * 20)
    before = tmp_path.joinpath("journal.sqlite").read_bytes()
    _refused_in_one_line(_cli(tmp_path, *args), "is not a database")
    assert tmp_path.joinpath("journal.sqlite").read_bytes() == before


@pytest.mark.parametrize("args", [a for a in JOURNAL_COMMANDS if a[0] != "backtest"],  # reads without migrating
                         ids=lambda a: " ".join(a[:2]))
def test_a_journal_migrated_by_a_newer_version_is_one_line_and_left_alone(tmp_path, args):
    journal = _journal_with_one_conversation(tmp_path)
    _update(journal, "UPDATE alembic_version SET version_num = '0999'")
    before = _contents(journal)
    _refused_in_one_line(_cli(tmp_path, *args), "newer statekeeper")
    assert _contents(journal) == before


@pytest.mark.parametrize("args", [["keys", "list"], ["transcript", "c1"], ["migrate"]], ids=lambda a: a[0])
def test_a_data_directory_that_is_a_file_is_one_line(tmp_path, args):
    not_a_directory = tmp_path / "data"
    not_a_directory.write_text("a file")
    _refused_in_one_line(_cli(not_a_directory, *args), "data directory")


@pytest.mark.parametrize("args", [["keys", "list"], ["transcript", "c1"], ["journal", "purge", "--older-than-days", "1"],
                                  ["backtest"], ["erase", "--customer", "raj_sanchez_2970"], ["retention", "purge"]],
                         ids=lambda a: " ".join(a[:2]))
def test_an_invalid_setting_is_named_in_one_line(tmp_path, args):
    done = _cli(tmp_path, *args, STATEKEEPER_RETENTION_DAYS="-5")
    _refused_in_one_line(done, "STATEKEEPER_RETENTION_DAYS")
    assert done.returncode == 2


@pytest.mark.parametrize("args", [["decisions", "--jsonl", "{missing}/out.jsonl"],
                                  ["decisions", "--jsonl", "{dir}"],
                                  ["backtest", "--json", "{missing}/report.json"]], ids=lambda a: " ".join(a[:2]))
def test_an_output_file_that_cannot_be_written_is_refused_before_any_work(tmp_path, args):
    _journal_with_one_conversation(tmp_path)
    args = [a.format(missing=tmp_path / "no-such-dir", dir=tmp_path) for a in args]
    done = _cli(tmp_path, *args)
    _refused_in_one_line(done, "cannot be written")
    assert done.returncode == 2 and "summary" not in done.stdout  # refused before the run, not after it


@pytest.mark.parametrize("args", [["journal", "purge", "--older-than-days", "1e308"],
                                  ["retention", "purge", "--older-than-days", "1e308"],
                                  ["retention", "schedule", "--every-hours", "1e308"]], ids=lambda a: " ".join(a[:2]))
def test_a_period_too_large_for_a_date_is_refused_as_an_option(tmp_path, args):
    done = _cli(tmp_path, *args, STATEKEEPER_RETENTION_DAYS="30")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and "OverflowError" not in done.stderr
    assert "Invalid value for" in done.stderr


def test_a_retention_setting_too_large_for_a_date_is_refused(tmp_path):
    done = _cli(tmp_path, "retention", "schedule", STATEKEEPER_RETENTION_DAYS="1e308")
    _refused_in_one_line(done, "STATEKEEPER_RETENTION_DAYS")


@pytest.mark.parametrize("args", [
    ["--outcome", "maybe", "--operator", "op-1", "--note", "checked"],
    ["--outcome", "applied", "--operator", "op 1", "--note", "checked"],
    ["--outcome", "applied", "--operator", "op-1", "--note", ""],
])
def test_resolve_refuses_a_bad_resolution_before_connecting(tmp_path, args):
    """`resolve --outcome maybe` connected to Temporal before it refused the outcome: with the
    server away, the user was told "not reachable" instead of what was wrong (a helper's finding)."""
    done = _cli(tmp_path, "resolve", "c-1", "--step", "s-1", *args, STATEKEEPER_TEMPORAL_ADDRESS="127.0.0.1:1")
    assert done.returncode == 2, done.stdout + done.stderr  # bad input, as every command says it
    said = " ".join(done.stderr.split())
    assert "invalid resolution" in said and "reachable" not in said and "Traceback" not in said, said
