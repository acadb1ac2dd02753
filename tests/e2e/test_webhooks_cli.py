"""``statekeeper webhooks`` as a user runs it, each command a real process on a journal database
of its own (no Temporal server needed but for ``retry``): a refused URL (not http(s), loopback
without ``STATEKEEPER_WEBHOOK_ALLOW_LOOPBACK``, over 2 KB) and an unknown event type end with one
line and status 2, and store nothing; ``create`` prints the secret alone on standard output;
``list --json`` never shows it; another tenant's webhook cannot be deleted (status 1); ``delete``
removes it; every change is audited as ``cli``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from activities.store.audit import AuditLog

ROOT = Path(__file__).resolve().parents[2]


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "starter.cli.app", "webhooks", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_webhooks_are_created_listed_and_deleted_and_bad_input_stores_nothing(tmp_path):
    env = {**os.environ, "STATEKEEPER_DATA_DIR": str(tmp_path), "STATEKEEPER_DEV_STATE_FILE": str(tmp_path / "dev.json"),
           "STATEKEEPER_TEMPORAL_ADDRESS": "127.0.0.1:1"}
    env.pop("STATEKEEPER_WEBHOOK_ALLOW_LOOPBACK", None)
    for url, event, reason in (("ftp://example.com/x", "*", "must start with http:// or https://"),
                               ("http://127.0.0.1:9/x", "*", "loopback address"),
                               ("https://example.com/" + "a" * 2100, "*", "at most 2048 characters"),
                               ("http://127.0.0.1:9/x", "refund.done", "unknown event type")):
        refused = _cli(env, "create", "--url", url, "--event", event)
        assert refused.returncode == 2 and reason in refused.stderr and refused.stdout == "", refused.stderr
        assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert json.loads(_cli(env, "list", "--json").stdout) == []

    allowed = {**env, "STATEKEEPER_WEBHOOK_ALLOW_LOOPBACK": "true"}
    made = _cli(allowed, "create", "--url", "http://127.0.0.1:9/x", "--event", "approval.requested",
                "--event", "conversation.ended", "--description", "orders backend")
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip()
    assert secret.startswith("whsec_") and made.stdout.count("\n") == 1
    (listed,) = json.loads(_cli(env, "list", "--json").stdout)
    assert listed["events"] == ["approval.requested", "conversation.ended"] and listed["tenant"] == "default"
    assert secret not in json.dumps(listed) and "secret" not in listed
    webhook_id = listed["webhook_id"]
    assert secret not in _cli(env, "list").stdout

    other = _cli(env, "delete", webhook_id, "--tenant", "acme")
    assert other.returncode == 1 and "does not exist" in other.stderr
    assert json.loads(_cli(env, "deliveries", webhook_id, "--json").stdout) == []
    gone = _cli(env, "delete", webhook_id)
    assert gone.returncode == 0 and json.loads(_cli(env, "list", "--json").stdout) == []

    audit = AuditLog(f"sqlite:///{tmp_path / 'journal.sqlite'}")
    assert [(e.actor, e.action, e.subject) for e in audit.entries(subject=webhook_id)] == [
        ("cli", "create_webhook", webhook_id), ("cli", "delete_webhook", webhook_id)]
