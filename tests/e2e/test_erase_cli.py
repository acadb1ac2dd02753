"""`statekeeper erase` and `statekeeper retention` as a user runs them: real processes against
a detached `statekeeper dev` (embedded Temporal server, worker, SQLite): a chat leaves a
running conversation, erasure refuses it (exit 1) and then terminates and erases it on
request, with the audit entries; a purge and the schedule's creation and deletion. Input
refused before any server is needed (a malformed id, no pseudonym key, retention off) exits 2
with a message and no traceback (in process, through the same typer app)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from activities.store.journal import JournalStore
from activities.store.audit import AuditLog
from starter.cli.app import app
from tests.ports import free_port
from tests.policy_fixtures import CUSTOMER, EMAIL, PENDING

ROOT = Path(__file__).resolve().parents[2]


def _cli(env: dict, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "starter.cli.app", *args], cwd=ROOT, env=env, input=stdin,
                          capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("args, says", [
    (["erase", "--customer", "raj sanchez"], "a customer id is 1-128 characters"),
    (["erase", "--customer", "ｒａｊ_sanchez_2970"], "a customer id is 1-128 characters"),
    (["erase", "--customer", CUSTOMER], "no pseudonym key"),
    (["retention", "purge"], "retention is off: set STATEKEEPER_RETENTION_DAYS"),
    (["retention", "schedule"], "retention is off"),
    # the audit entry of an erasure names whoever --actor says: never nobody (an unset shell
    # variable), a terminal escape, or 5000 characters cut to 200 silently
    (["erase", "--customer", CUSTOMER, "--actor", ""], "--actor is who asks"),
    (["erase", "--customer", CUSTOMER, "--actor", "dpo\x1b[2J"], "--actor is who asks"),
    (["erase", "--customer", CUSTOMER, "--actor", "x" * 5000], "--actor is who asks"),
    (["retention", "purge", "--older-than-days", "1", "--actor", " "], "--actor is who asks"),
])
def test_refused_before_any_server(tmp_path, monkeypatch, args, says):
    monkeypatch.setenv("STATEKEEPER_DATA_DIR", str(tmp_path))  # no key made here yet
    monkeypatch.setenv("STATEKEEPER_DEV_STATE_FILE", str(tmp_path / "dev.json"))
    monkeypatch.setenv("STATEKEEPER_TEMPORAL_ADDRESS", f"127.0.0.1:{free_port()}")  # nothing listens
    monkeypatch.delenv("STATEKEEPER_RETENTION_DAYS", raising=False)
    result = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert result.exit_code == 2 and says in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert list(tmp_path.iterdir()) == []  # nothing was started or created


def test_erase_and_retention_commands(tmp_path):
    port, ui_port, api_port = free_port(), free_port(), free_port()
    data = tmp_path / "data"
    env = dict(os.environ, STATEKEEPER_TEMPORAL_ADDRESS=f"127.0.0.1:{port}", STATEKEEPER_UI_PORT=str(ui_port),
               STATEKEEPER_API_PORT=str(api_port), STATEKEEPER_CODEC_PORT=str(free_port()), STATEKEEPER_DATA_DIR=str(data),
               STATEKEEPER_DEV_STATE_FILE=str(tmp_path / "dev.json"), COLUMNS="300",
               STATEKEEPER_APPROVAL_THRESHOLD="100000", STATEKEEPER_RETENTION_DAYS="30")
    env.pop("ANTHROPIC_API_KEY", None)
    try:
        started = _cli(env, "dev", "--detach")
        assert started.returncode == 0, started.stdout + started.stderr
        script = f"Hi, my email is {EMAIL}\nPlease cancel order {PENDING}, I ordered it by mistake\nyes\nquit\n"
        chat = _cli(env, "chat", "--conversation-id", "erase-chat", stdin=script)
        assert chat.returncode == 0 and "cancelled" in chat.stdout, chat.stdout + chat.stderr

        refused = _cli(env, "erase", "--customer", CUSTOMER)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "1 running conversation(s) or refund(s) (support-erase-chat)" in refused.stderr
        assert "nothing was erased" in refused.stderr and "Traceback" not in refused.stderr
        assert refused.stdout == ""  # a refusal is said on stderr
        journal = JournalStore(f"sqlite:///{data / 'journal.sqlite'}")
        assert journal.transcript("erase-chat")

        erased = _cli(env, "erase", "--customer", CUSTOMER, "--terminate-running", "--actor", "dpo-1")
        assert erased.returncode == 0, erased.stdout + erased.stderr
        match = re.search(r"erased customer (cust-[0-9a-f]{20}): 1 conversation\(s\); Temporal: 2 run\(s\) "
                          r"deleted \(1 terminated\)", erased.stdout)  # the conversation and its cancel's refund
        assert match, erased.stdout
        assert CUSTOMER not in erased.stdout and EMAIL not in erased.stdout
        assert journal.transcript("erase-chat") == []
        audit = AuditLog(f"sqlite:///{data / 'journal.sqlite'}")
        assert [(e.actor, e.action) for e in audit.entries(subject=match.group(1))] == [
            ("cli", "erase_customer_refused"), ("dpo-1", "erase_customer")]

        purged = _cli(env, "retention", "purge", "--older-than-days", "0")
        assert purged.returncode == 0 and purged.stdout.startswith("purged "), purged.stdout + purged.stderr
        assert [e.action for e in audit.entries(subject="retention")] == ["retention_purge"]

        created = _cli(env, "retention", "schedule", "--every-hours", "6")
        assert created.returncode == 0, created.stdout + created.stderr
        assert "schedule statekeeper-retention created: every 6 h, purge closed conversations older than 30 " \
               "day(s)" in created.stdout
        assert "schedule statekeeper-retention deleted" in _cli(env, "retention", "schedule", "--delete").stdout
    finally:
        _cli(env, "stop")


def test_the_note_after_an_erasure_says_what_its_counts_mean():
    """An erasure that found nothing (a mistyped id) says so with a hint, not 'Temporal accepted
    the deletions; it removes the histories shortly' after 'Temporal: 0 run(s) deleted'."""
    from activities.erasure.records import RecordCounts
    from activities.erasure.service import ErasureReport
    from starter.cli.erasure import erasure_note

    nothing = erasure_note(ErasureReport(pseudonym="cust-" + "0" * 20))
    assert "Nothing of this customer was found" in nothing and "raj_sanchez_2970" in nothing
    assert "accepted the deletions" not in nothing and "are kept" in nothing
    journal_only = erasure_note(ErasureReport(pseudonym="cust-" + "0" * 20, conversations=1, journal_rows=4))
    assert "accepted the deletions" not in journal_only and "Nothing" not in journal_only
    ledger_only = erasure_note(ErasureReport(pseudonym="cust-" + "0" * 20, records=RecordCounts(ledger_anonymised=1)))
    assert "Nothing" not in ledger_only
    runs = erasure_note(ErasureReport(pseudonym="cust-" + "0" * 20, conversations=1, workflow_runs=2))
    assert runs.startswith("Temporal accepted the deletions") and "are kept" in runs
