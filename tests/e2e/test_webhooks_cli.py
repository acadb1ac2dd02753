"""``statekeeper webhooks`` as a user runs it, each command a real process on a journal database
of its own (no Temporal server needed but for ``retry``): a refused URL (not http(s), loopback
without ``STATEKEEPER_WEBHOOK_ALLOW_LOOPBACK``, over 2 KB) and an unknown event type end with one
line and status 2, and store nothing; ``create`` prints the secret alone on standard output;
``list --json`` never shows it; another tenant's webhook cannot be deleted (status 1); ``delete``
removes it; every change is audited as ``cli``.

``listen`` (the local receiver): it needs a secret or ``--register`` (status 2 otherwise); it
answers 204 to a signed delivery and prints it once however often it comes (deduplicated by
``webhook-id``), 400 to a changed body, another secret's signature or none; detached, it
registers a webhook for every type pointing at itself (refused with status 1 and nothing stored
when loopback receivers are not allowed), records its counts in the data directory, where the
wait of ``taubench``'s summary reads a run's deliveries as delivered, verified and failed
(bounded while some are pending), and ``statekeeper stop`` ends it and deletes its webhook."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from activities.store.audit import AuditLog
from activities.store.webhooks import enqueue, new_secret
from activities.webhooks.delivery import signed_headers
from settings import Settings
from starter.dev.listener import DrainReport, await_deliveries
from starter.runtime.webhooks import webhook_store

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


def _listening(env: dict, *args: str) -> tuple[subprocess.Popen, str]:
    """``statekeeper webhooks listen`` in the foreground with ``args``; returns it and its URL
    (from its first line on standard error)."""
    proc = subprocess.Popen([sys.executable, "-m", "starter.cli.app", "webhooks", "listen", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stderr.readline()
    assert first.startswith("listening on http://127.0.0.1:"), first + proc.stderr.read()
    return proc, first.split()[2].rstrip(";")


def test_listen_verifies_deduplicates_prints_each_event_once_and_refuses_bad_signatures(tmp_path):
    env = {**os.environ, "STATEKEEPER_DATA_DIR": str(tmp_path), "STATEKEEPER_DEV_STATE_FILE": str(tmp_path / "dev.json"),
           "STATEKEEPER_TEMPORAL_ADDRESS": "127.0.0.1:1"}
    env.pop("STATEKEEPER_WEBHOOK_SECRET", None)
    for args in ((), ("--register", "--secret", new_secret())):  # a secret, or --register: one of them
        refused = _cli(env, "listen", "--port", "0", *args)
        assert refused.returncode == 2 and "--register" in refused.stderr and "Traceback" not in refused.stderr

    secret = new_secret()
    (tmp_path / "secret").write_text(secret + "\n")
    proc, url = _listening(env, "--port", "0", "--secret-file", str(tmp_path / "secret"))
    try:
        event = {"id": "evt_0123456789abcdef01234567", "type": "approval.requested", "timestamp": "2026-12-06T08:00:00Z",
                 "sequence": 3, "data": {"conversation_id": "desk-43", "approval_id": "apr-1"}}
        body = json.dumps(event).encode()
        signed = signed_headers(secret, event["id"], body)
        answers = [httpx.post(url, content=body, headers=signed).status_code,
                   httpx.post(url, content=body, headers=signed).status_code,  # a redelivery: the same id
                   httpx.post(url, content=body.replace(b"apr-1", b"apr-2"), headers=signed).status_code,
                   httpx.post(url, content=body, headers=signed_headers(new_secret(), event["id"], body)).status_code,
                   httpx.post(url, content=body).status_code,
                   httpx.get(url).status_code]
        assert answers == [204, 204, 400, 400, 400, 404]
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out.splitlines() == ["approval.requested       seq   3  desk-43"], out  # once, deduplicated
    assert "Traceback" not in err


def test_listen_detached_registers_its_webhook_records_its_counts_and_stop_removes_both(tmp_path):
    env = {**os.environ, "STATEKEEPER_DATA_DIR": str(tmp_path), "STATEKEEPER_DEV_STATE_FILE": str(tmp_path / "dev.json"),
           "STATEKEEPER_TEMPORAL_ADDRESS": "127.0.0.1:1"}
    env.pop("STATEKEEPER_WEBHOOK_ALLOW_LOOPBACK", None)
    record = tmp_path / "webhook-listener.json"
    refused = _cli(env, "listen", "--detach", "--port", "0")  # loopback receivers are not allowed here
    assert refused.returncode == 1 and "loopback address" in refused.stderr, refused.stderr
    assert not record.exists() and json.loads(_cli(env, "list", "--json").stdout) == []

    allowed = {**env, "STATEKEEPER_WEBHOOK_ALLOW_LOOPBACK": "true"}
    started = _cli(allowed, "listen", "--detach", "--port", "0")
    assert started.returncode == 0, started.stderr
    running = json.loads(record.read_text())
    (listed,) = json.loads(_cli(env, "list", "--json").stdout)
    assert listed["webhook_id"] == running["webhook_id"] and listed["url"] == running["url"]
    assert listed["events"] == ["*"]
    # a request it cannot verify is refused and counted where `statekeeper` reads it
    assert httpx.post(running["url"], content=b"{}", headers={"webhook-id": "evt_x"}).status_code == 400
    assert json.loads(record.read_text())["counts"]["bad_signature"] == 1
    again = _cli(allowed, "listen", "--detach", "--port", "0")  # one per data directory: the running one
    assert again.returncode == 0 and str(running["pid"]) in again.stderr.replace("\n", " ")

    # what taubench's summary reads: the run's deliveries by status, and what the listener verified
    settings = Settings(data_dir=tmp_path)
    store = webhook_store(settings)
    hook = running["webhook_id"]
    try:
        with store.engine.begin() as conn:
            events = [{"event_id": f"evt_{n:024x}", "type": "conversation.replied", "sequence": n} for n in (1, 2, 3)]
            enqueue(conn, "default", {"conversation_id": "tb-run1-0"}, events)
            enqueue(conn, "default", {"conversation_id": "tb-run2-0"}, [{**events[0], "event_id": "evt_other"}])
            sealed = conn.exec_driver_sql("SELECT secret FROM webhooks WHERE webhook_id = ?", (hook,)).scalar_one()
        secret = store.seal.open(hook, sealed)
        waited = await_deliveries(settings, "tb-run1-", timeout_seconds=0.5)
        assert waited == DrainReport(pending=3, bad_signature=1)  # the wait is bounded
        for event in events[:2]:
            body = json.dumps({"id": event["event_id"], "type": event["type"], "sequence": event["sequence"],
                               "timestamp": "2026-12-06T08:00:00Z", "data": {"conversation_id": "tb-run1-0"}}).encode()
            assert httpx.post(running["url"], content=body,
                              headers=signed_headers(secret, event["event_id"], body)).status_code == 204
            store.attempted(hook, event["event_id"], 204, None)
        store.failed(hook, events[2]["event_id"], "answered 500")
        assert await_deliveries(settings, "tb-run1-", timeout_seconds=10) == DrainReport(
            delivered=2, verified=2, failed=1, bad_signature=1)
    finally:
        store.close()

    stopped = subprocess.run([sys.executable, "-m", "starter.cli.app", "stop"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 0 and "stopped the webhook listener" in stopped.stdout + stopped.stderr
    assert not record.exists() and json.loads(_cli(env, "list", "--json").stdout) == []
    with pytest.raises(OSError):
        os.kill(running["pid"], 0)


def test_stop_deletes_the_webhook_of_a_listener_that_was_killed(tmp_path):
    env = {**os.environ, "STATEKEEPER_DATA_DIR": str(tmp_path), "STATEKEEPER_DEV_STATE_FILE": str(tmp_path / "dev.json"),
           "STATEKEEPER_TEMPORAL_ADDRESS": "127.0.0.1:1", "STATEKEEPER_WEBHOOK_ALLOW_LOOPBACK": "true"}
    assert _cli(env, "listen", "--detach", "--port", "0").returncode == 0
    running = json.loads((tmp_path / "webhook-listener.json").read_text())
    os.kill(running["pid"], signal.SIGKILL)  # no clean exit: its webhook stays behind
    assert [w["webhook_id"] for w in json.loads(_cli(env, "list", "--json").stdout)] == [running["webhook_id"]]
    stopped = subprocess.run([sys.executable, "-m", "starter.cli.app", "stop"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(_cli(env, "list", "--json").stdout) == []
    assert not (tmp_path / "webhook-listener.json").exists()
