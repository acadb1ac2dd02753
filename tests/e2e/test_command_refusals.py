"""Commands on a bad day, as real processes: each refusal is one line on stderr that says what is
wrong and what to check, with a non-zero status, no traceback, no exception class name or
transport-library text (``tonic::transport::Error``), and nothing changed:

- the commands that need no Temporal server (keys, transcript, decisions, journal erase and
  purge, migrate, backtest, resolve's own checks): a journal database that is not one, one
  migrated by a newer statekeeper, a data directory that is a file, an invalid setting, an
  output file that cannot be written, a period too large for a date, a bad resolution (refused
  before connecting); the database is left as it was;
- the long-running commands (``statekeeper api``, ``codec-server``, ``worker``) as an operator
  starts them on day one, with a database that cannot be reached (a wrong host, port or password
  in ``STATEKEEPER_JOURNAL_URL`` / ``STATEKEEPER_DATABASE_URL``, PostgreSQL not up yet): each
  names the database, with status 2, never a page of SQLAlchemy traceback. No Temporal server
  runs: the API and the codec server do not need one to start, and the worker's connection is
  stubbed;
- commands started with no Temporal server at the configured address, or with an invalid
  setting (unusable codec keys, a certificate without its key): status 2 (1 for the
  healthcheck).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from activities.store.journal import JournalStore
from settings import Settings
from starter.runtime import worker as worker_module
from starter.runtime.preflight import StartupRefused
from workflows.domain.journal import EntryKind, Role, TranscriptRecord, TurnRecord
from tests.ports import free_port


# --- Commands that need no Temporal server ---

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
    """`resolve --outcome maybe` refuses the outcome before it connects to Temporal: with the
    server away, the user is told what is wrong, not "not reachable"."""
    done = _cli(tmp_path, "resolve", "c-1", "--step", "s-1", *args, STATEKEEPER_TEMPORAL_ADDRESS="127.0.0.1:1")
    assert done.returncode == 2, done.stdout + done.stderr  # bad input, as every command says it
    said = " ".join(done.stderr.split())
    assert "invalid resolution" in said and "reachable" not in said and "Traceback" not in said, said


# --- Servers with a database that cannot be reached ---

BIN = Path(sys.executable).parent
UNREACHABLE = "postgresql+psycopg://statekeeper@127.0.0.1:1/nowhere"  # port 1: refused at once


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "STATEKEEPER_DATA_DIR": str(tmp_path), "STATEKEEPER_TEMPORAL_ADDRESS": "127.0.0.1:1",
            "STATEKEEPER_DEV_STATE_FILE": str(tmp_path / "dev.json"), "NO_COLOR": "1", "COLUMNS": "250", **extra}


@pytest.mark.parametrize("command", [["api", "--port", "1"], ["codec-server", "--port", "1"],
                                     ["api", "--host", "0.0.0.0", "--port", "1"]])
def test_a_server_refuses_an_unreachable_journal_in_one_line(tmp_path, command):
    # port 1 is never listened on: the refusal must come before any bind
    # no COLUMNS: a container's log is a pipe, which rich took for 80 columns and wrapped at
    env = _env(tmp_path, STATEKEEPER_JOURNAL_URL=UNREACHABLE)
    env.pop("COLUMNS")
    done = subprocess.run([str(BIN / "statekeeper"), *command], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, (done.stdout, done.stderr)
    said = done.stderr.strip()
    assert not any(name in said for name in CLASS_NAMES), said
    assert said == ("statekeeper: the journal database (API keys, audit log) cannot be reached or refused the "
                    "connection: check the URL, the server and its credentials"), said


def _no_temporal(monkeypatch) -> None:
    """The worker's Temporal connection and preflight stubbed: only its database is tried."""
    async def connect(settings):
        return object()

    async def preflight(client, settings):
        return None

    monkeypatch.setattr(worker_module, "connect", connect)
    monkeypatch.setattr(worker_module, "preflight", preflight)


def test_a_worker_refuses_an_unreachable_system_of_record(tmp_path, monkeypatch):
    _no_temporal(monkeypatch)
    settings = Settings(data_dir=tmp_path, database_url=UNREACHABLE, codec_enabled=False)
    with pytest.raises(StartupRefused) as refused:
        asyncio.run(worker_module.run_worker(settings))
    assert str(refused.value) == ("the system of record (STATEKEEPER_DATABASE_URL) cannot be reached or refused the "
                                  "connection: check the URL, the server and its credentials")


def test_a_worker_names_the_default_sqlite_system_of_record(tmp_path, monkeypatch):
    _no_temporal(monkeypatch)
    (tmp_path / "statekeeper.sqlite").write_bytes(b"not a database, " * 64)
    with pytest.raises(StartupRefused) as refused:
        asyncio.run(worker_module.run_worker(Settings(data_dir=tmp_path, codec_enabled=False)))
    said = str(refused.value)
    assert said.startswith(f"the system of record {tmp_path / 'statekeeper.sqlite'} is not a database"), said
    assert "journal" not in said, said


# --- No Temporal server, or an invalid setting ---

LEAKS = ("Traceback", "tonic", "RuntimeError", "StartupRefused", "TemporalUnreachable", "Error(")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """Its own data directory and codec key; a Temporal address nothing listens on."""
    return {**os.environ, "STATEKEEPER_DATA_DIR": str(tmp_path), "STATEKEEPER_DEV_STATE_FILE": str(tmp_path / "dev.json"),
            "STATEKEEPER_TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}", "NO_COLOR": "1", "COLUMNS": "200"}


@pytest.mark.parametrize("command, status", [(["worker"], 2), (["worker-health"], 1)])
def test_no_server_is_a_plain_message(env, command, status):
    done = subprocess.run([str(BIN / "statekeeper"), *command], env=env, capture_output=True, text=True, timeout=60)
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == status, output
    assert f"Temporal is not reachable at {env['STATEKEEPER_TEMPORAL_ADDRESS']}" in output
    assert "STATEKEEPER_TEMPORAL_ADDRESS" in output
    assert not [leak for leak in LEAKS if leak in output], output


def test_a_certificate_without_its_key_is_named_by_the_healthcheck(env, tmp_path):
    cert = tmp_path / "client.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\n")
    done = subprocess.run([str(BIN / "statekeeper"), "worker-health"], capture_output=True, text=True, timeout=60,
                          env={**env, "STATEKEEPER_TEMPORAL_TLS_CLIENT_CERT": str(cert)})
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1 and "STATEKEEPER_TEMPORAL_TLS_CLIENT_KEY" in output, output
    assert "not reachable" not in output and not [leak for leak in LEAKS if leak in output], output


@pytest.mark.parametrize("command", [["api", "--port", "1"], ["worker"], ["state", "c-1"]])
def test_an_invalid_setting_is_one_line_naming_it(env, command):
    done = subprocess.run([str(BIN / "statekeeper"), *command], capture_output=True, text=True, timeout=60,
                          env={**env, "STATEKEEPER_TOKEN_BUDGET": "0"})
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2 and "invalid setting: STATEKEEPER_TOKEN_BUDGET" in output, output
    assert "Traceback" not in output and "ValidationError" not in output and "pydantic" not in output, output
    assert done.stdout == ""  # said on stderr: `statekeeper state ID > state.json` leaves no message in the file


@pytest.mark.parametrize("command, value", [
    *((command, value) for command in (["api"], ["codec-server"]) for value in ("", "abc", "id:not-base64")),
    (["worker"], "abc"), (["state", "c-1"], "id:not-base64"), (["chat"], ""),
])
def test_unusable_codec_keys_are_an_invalid_setting_naming_the_shape(env, command, value):
    """Set but empty or malformed, STATEKEEPER_CODEC_KEYS is an invalid setting: one line, no
    ``CodecKeyError`` traceback, and ``chat`` and ``state`` start no embedded server first."""
    done = subprocess.run([str(BIN / "statekeeper"), *command], capture_output=True, text=True, timeout=60,
                          env={**env, "STATEKEEPER_CODEC_KEYS": value}, stdin=subprocess.DEVNULL)
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, output
    assert "invalid setting: STATEKEEPER_CODEC_KEYS: " in output and "expected `id:base64key,...`" in output, output
    assert not [leak for leak in (*LEAKS, "CodecKey") if leak in output], output
    assert done.stdout == ""  # said on stderr (the worker's in its log)
    assert not (Path(env["STATEKEEPER_DATA_DIR"]) / "temporal.sqlite").exists()  # nothing started for nothing
