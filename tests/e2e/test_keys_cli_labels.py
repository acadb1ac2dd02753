"""``statekeeper keys`` and the labels people give keys: a label is shown to operators in
``keys list``, so it must not carry terminal escape sequences (one that retitles or clears
the operator's terminal, as the transcript's text could before it was escaped), and a label
over the 200 characters the table keeps is refused rather than cut silently. Found by a
hostile review of the CLI. Real processes, a real SQLite journal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from activities.store.api_keys import KeyStore, Role, api_keys

ROOT = Path(__file__).resolve().parents[2]
ESCAPES = "ok\x1b]0;owned\x07\x1b[2J\x1b[31mred"


def _cli(data: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, STATEKEEPER_DATA_DIR=str(data), STATEKEEPER_DEV_STATE_FILE=str(data) + ".dev.json",
               COLUMNS="250")
    env.pop("STATEKEEPER_JOURNAL_URL", None)
    return subprocess.run([sys.executable, "-m", "starter.cli.app", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_label_with_control_characters_is_refused_and_nothing_is_created(tmp_path):
    done = _cli(tmp_path, "keys", "create", "--tenant", "t1", "--role", "service", "--label", ESCAPES)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == "" and "\x1b" not in done.stderr and "Traceback" not in done.stderr
    assert "label" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "API keys (0)" in _cli(tmp_path, "keys", "list").stdout


def test_a_label_longer_than_the_table_keeps_is_refused_not_cut(tmp_path):
    done = _cli(tmp_path, "keys", "create", "--tenant", "t1", "--role", "service", "--label", "x" * 201)
    assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)
    assert "200" in done.stderr
    assert _cli(tmp_path, "keys", "create", "--tenant", "t1", "--role", "service", "--label", "x" * 200).returncode == 0


def test_keys_list_never_passes_terminal_escapes_from_a_stored_label(tmp_path):
    tmp_path.mkdir(exist_ok=True)
    store = KeyStore(f"sqlite:///{tmp_path / 'journal.sqlite'}", "secret-for-the-test")
    try:
        record, _ = store.create("t1", Role.SERVICE, label="plain")
        with store.engine.begin() as conn:  # as an older version stored it, before labels were checked
            conn.execute(api_keys.update().where(api_keys.c.key_id == record.key_id).values(label=ESCAPES))
    finally:
        store.close()
    shown = _cli(tmp_path, "keys", "list")
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    assert "\\x1b" in shown.stdout  # shown escaped, as the transcript shows it


def test_a_customer_scope_that_is_no_customer_id_is_refused_and_nothing_is_created(tmp_path):
    # adversarial review: --customer "" (an unset shell variable) made a key scoped to the
    # pseudonym of the empty id, a customer that cannot exist, and said it was created
    for customer in ("", " ", "raj sanchez", "x" * 129, "raj\x1b[2J"):
        done = _cli(tmp_path, "keys", "create", "--tenant", "t1", "--role", "service", "--customer", customer)
        assert done.returncode == 2, (customer, done.stdout, done.stderr)
        assert done.stdout == "" and "customer id" in done.stderr and "\x1b" not in done.stderr
    assert "API keys (0)" in _cli(tmp_path, "keys", "list").stdout
    made = _cli(tmp_path, "keys", "create", "--tenant", "t1", "--role", "service", "--customer", "raj_sanchez_2970")
    assert made.returncode == 0, made.stderr
