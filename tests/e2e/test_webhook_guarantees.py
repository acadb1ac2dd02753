"""What a backend is promised about a conversation's webhooks, end to end on a real Temporal dev
server, the API over real HTTP with API keys, and the local receiver of ``statekeeper webhooks
listen`` (``starter.dev.receiver``: it verifies each Standard Webhooks signature and
deduplicates by ``webhook-id``) on a loopback port:

- A conversation authenticates, asks to cancel an order above the approval threshold, confirms;
  a supervisor approves through the API, the write applies and the conversation ends with the
  user's goodbye. The receiver gets ``approval.requested``, ``approval.decided``,
  ``operation.applied`` and ``conversation.ended`` with valid signatures and, deduplicated by
  ``webhook-id``, every sequence from 1 without gaps: the same events as the conversation's SSE
  stream, which resumes from a ``Last-Event-ID`` with only the later events (no gap, no repeat).
- With a worker process SIGKILLed while a delivery's request is in flight, a second worker
  process started, and the receiver down (connection refused) for 60 seconds while the
  conversation goes on: every event of the stream arrives afterwards, each id at least once (the
  interrupted one again, with its ``webhook-id``), and no event (no sequence) with two ids.
  Retries are shortened (``STATEKEEPER_WEBHOOK_RETRY_*``) so the catch-up takes seconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from activities.store.api_keys import KeyStore, Role
from settings import Settings
from starter.api.auth import access_from_settings
from starter.api.server import api_beside
from starter.client.conversations import StatekeeperClient
from starter.dev.receiver import Receiver, serve
from tests.api_stack import keyed_stack
from tests.policy_fixtures import EMAIL, PENDING
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
MILESTONES = ("approval.requested", "approval.decided", "operation.applied", "conversation.ended")
DOWN_SECONDS = 60.0
FAST_RETRIES = {"webhook_allow_loopback": True, "webhook_retry_initial_seconds": 1.0,
                "webhook_retry_max_interval_seconds": 3.0, "webhook_sweep_seconds": 5.0}


class _Listening:
    """The listener's receiver served on a loopback port on a thread; ``stop`` and ``start``
    (on the same port) take it down and up again."""

    def __init__(self, receiver: Receiver, port: int = 0) -> None:
        self.receiver, self.port, self.server = receiver, port, None

    def start(self) -> None:
        self.server = serve(self.receiver, self.port)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()  # the port refuses connections until start

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"


class _Holding(Receiver):
    """The real receiver, except that while ``hold`` is set one request waits (its sender's
    delivery activity in flight) until ``release``; ``held`` is set once one waits."""

    def __init__(self, secret: str | None) -> None:
        super().__init__(secret, keep=True)
        self.hold, self.held, self.release = threading.Event(), threading.Event(), threading.Event()

    def receive(self, body: bytes, headers: dict[str, str]) -> int:
        if self.hold.is_set():
            self.hold.clear()
            self.held.set()
            self.release.wait(120)
        return super().receive(body, headers)


async def _stream(http: httpx.AsyncClient, headers: dict, cid: str, last: str | None = None) -> list[dict]:
    """The conversation's SSE frames ``{"id", "event", "data"}`` (the stream of a finished
    conversation ends by itself)."""
    if last is not None:
        headers = {**headers, "Last-Event-ID": last}
    response = await asyncio.wait_for(http.get(f"/conversations/{cid}/events", params={"wait": 0}, headers=headers), 30)
    assert response.status_code == 200, response.text
    frames = []
    for block in response.text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if fields:
            frames.append({"id": fields["id"], "event": fields["event"], "data": json.loads(fields["data"])})
    return frames


async def _until_stream_has(http, headers, cid: str, event_type: str, seconds: float = 60) -> list[dict]:
    deadline = time.monotonic() + seconds
    while True:
        frames = await _stream(http, headers, cid)
        if any(f["event"] == event_type for f in frames):
            return frames
        assert time.monotonic() < deadline, f"no {event_type} in {[f['event'] for f in frames]}"
        await asyncio.sleep(0.2)


async def _arrived(receiver: Receiver, cid: str, count: int, seconds: float) -> dict[str, dict]:
    """The distinct events of ``cid`` the receiver verified, once there are ``count``."""
    deadline = time.monotonic() + seconds
    while True:
        got = {i: e for i, e in list(receiver.events.items()) if e["data"].get("conversation_id") == cid}
        if len(got) >= count:
            return got
        assert time.monotonic() < deadline, f"{len(got)} of {count} events arrived"
        await asyncio.sleep(0.2)


async def _conversation_to_approval(http, svc: dict, op: dict) -> tuple[str, str]:
    """Open a conversation, authenticate, ask to cancel ``PENDING`` (826.70, above the threshold)
    and confirm; returns (conversation id, approval id)."""
    opened = await http.post("/conversations", json={"text": f"Hi, my email is {EMAIL}"}, headers=svc)
    assert opened.status_code == 201, opened.text
    cid = opened.json()["conversation_id"]
    await _say(http, svc, cid, f"Please cancel order {PENDING}, I ordered it by mistake")
    approval_id = (await _say(http, svc, cid, "yes"))["awaiting_approval"]
    assert approval_id
    return cid, approval_id


async def _say(http, svc: dict, cid: str, text: str) -> dict:
    response = await http.post(f"/conversations/{cid}/messages", json={"text": text}, headers=svc)
    assert response.status_code == 200, response.text
    return response.json()


async def _approve_and_end(http, svc: dict, op: dict, cid: str, approval_id: str) -> list[dict]:
    """Approve through the API, wait for the write, say goodbye; returns the ended stream."""
    decided = await http.post(f"/approvals/{approval_id}", json={"decision": "approve", "approver": "sup-ana"},
                              headers=op)
    assert decided.status_code == 200, decided.text
    await _until_stream_has(http, svc, cid, "operation.applied")
    await _say(http, svc, cid, "Thanks, that's all. Goodbye")
    return await _until_stream_has(http, svc, cid, "conversation.ended")


def _no_gaps(events: list[dict], cid: str) -> None:
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    assert all(e["data"]["conversation_id"] == cid for e in events)


async def _subscribe(http, op: dict, url: str) -> dict:
    made = await http.post("/webhooks", json={"url": url, "events": ["*"]}, headers=op)
    assert made.status_code == 201, made.text
    return made.json()


async def test_an_approved_cancel_reaches_the_receiver_signed_gapless_and_as_the_stream_says(temporal_env, tmp_path):
    roles = {"svc": ("default", Role.SERVICE), "op": ("default", Role.OPERATOR)}
    async with keyed_stack(temporal_env, tmp_path, roles, **FAST_RETRIES) as s:
        svc, op = s.headers["svc"], s.headers["op"]
        listening = _Listening(Receiver(None, keep=True))  # its secret once the webhook for its URL exists
        listening.start()
        try:
            made = await _subscribe(s.http, op, listening.url)
            listening.receiver.use_secret(made["secret"])
            cid, approval_id = await _conversation_to_approval(s.http, svc, op)
            frames = await _approve_and_end(s.http, svc, op, cid, approval_id)
            stream = [f["data"] for f in frames]
            got = await _arrived(listening.receiver, cid, len(stream), 60)
            # the stream resumes after any event with exactly the later ones: no gap, no repeat
            resumed = {last: await _stream(s.http, svc, cid, last=last) for last in (f["id"] for f in frames)}
        finally:
            listening.stop()

    delivered = sorted(got.values(), key=lambda e: e["sequence"])
    assert delivered == stream, "the same events, ids, sequences and times as the SSE stream"
    _no_gaps(delivered, cid)
    assert {f["id"] for f in frames} == {str(e["sequence"]) for e in stream}
    types = [e["type"] for e in delivered]
    assert [t for t in types if t in MILESTONES] == list(MILESTONES), types
    assert delivered[-1]["type"] == "conversation.ended" and delivered[-1]["data"]["status"] == "ended"
    applied = next(e for e in delivered if e["type"] == "operation.applied")
    assert applied["data"]["tool"] == "cancel_pending_order"
    assert listening.receiver.counts.bad_signature == 0
    assert listening.receiver.counts.verified >= len(stream)
    for last, later in resumed.items():
        assert later == frames[int(last):], last


@pytest.mark.timeout(300)
async def test_a_killed_worker_and_a_receiver_down_for_a_minute_lose_no_event_and_give_none_two_ids(
        temporal_env, tmp_path):
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'sor.sqlite'}", data_dir=tmp_path,
                        anthropic_api_key=None, task_queue=f"whkill-{uuid.uuid4().hex[:8]}", **FAST_RETRIES)
    workers: list[subprocess.Popen] = []

    def worker(name: str) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}  # the suite's codec keys too
        env.update({"STATEKEEPER_TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
                    "STATEKEEPER_TASK_QUEUE": settings.task_queue, "STATEKEEPER_DATABASE_URL": settings.database_url,
                    "STATEKEEPER_DATA_DIR": str(tmp_path), "STATEKEEPER_WEBHOOK_ALLOW_LOOPBACK": "true",
                    "STATEKEEPER_WEBHOOK_RETRY_INITIAL_SECONDS": "1",
                    "STATEKEEPER_WEBHOOK_RETRY_MAX_INTERVAL_SECONDS": "3", "STATEKEEPER_WEBHOOK_SWEEP_SECONDS": "5"})
        proc = subprocess.Popen([sys.executable, str(ROOT / "worker.py")], cwd=ROOT, env=env,
                                stdout=open(tmp_path / f"{name}.log", "ab"), stderr=subprocess.STDOUT)
        workers.append(proc)
        return proc

    async def polling() -> None:
        client = StatekeeperClient(temporal_env.client, settings.task_queue)
        deadline = time.monotonic() + 60
        while not await client.worker_polling():
            assert time.monotonic() < deadline, "the worker process never polled"
            await asyncio.sleep(0.2)

    first = worker("worker-1")
    receiver = _Holding(None)
    listening = _Listening(receiver)
    listening.start()
    try:
        await polling()
        keys = KeyStore(settings.resolved_journal_url(), settings.api_key_hmac_secret())
        svc = {"Authorization": f"Bearer {keys.create('default', Role.SERVICE)[1]}"}
        op = {"Authorization": f"Bearer {keys.create('default', Role.OPERATOR)[1]}"}
        async with api_beside(temporal_env.client, settings, host="127.0.0.1", port=free_port(),
                              access=access_from_settings(settings, "127.0.0.1")) as url:
            async with httpx.AsyncClient(base_url=url, timeout=90.0) as http:
                made = await _subscribe(http, op, listening.url)
                receiver.use_secret(made["secret"])
                opened = await http.post("/conversations", json={"text": f"Hi, my email is {EMAIL}"}, headers=svc)
                assert opened.status_code == 201, opened.text
                cid = opened.json()["conversation_id"]
                await _arrived(receiver, cid, 2, 30)  # started, replied: delivered while all is well

                receiver.hold.set()  # the next request waits with its delivery activity in flight
                asking = asyncio.create_task(_say(http, svc, cid, f"Please cancel order {PENDING}, by mistake"))
                deadline = time.monotonic() + 30
                while not receiver.held.is_set():
                    assert time.monotonic() < deadline, "no delivery reached the receiver"
                    await asyncio.sleep(0.05)
                first.send_signal(signal.SIGKILL)
                first.wait(10)
                listening.stop()  # down: connections refused from now on
                down_at = time.monotonic()
                receiver.release.set()  # its sender is dead: recorded, but no answer reaches anyone
                await asyncio.sleep(0.5)
                while_down = len(receiver.events)
                worker("worker-2")
                await polling()
                await asyncio.wait_for(asking, 90)
                approval_id = (await _say(http, svc, cid, "yes"))["awaiting_approval"]
                frames = await _approve_and_end(http, svc, op, cid, approval_id)
                stream = [f["data"] for f in frames]
                assert len(receiver.events) == while_down, "nothing arrives while the receiver is down"
                await asyncio.sleep(max(0.0, DOWN_SECONDS - (time.monotonic() - down_at)))
                listening.start()  # back on the same port
                got = await _arrived(receiver, cid, len(stream), 60)

                # the SSE stream of the same conversation resumes without gaps or repeats
                for resume_at in ("1", frames[len(frames) // 2]["id"], frames[-1]["id"]):
                    later = await _stream(http, svc, cid, last=resume_at)
                    assert later == frames[int(resume_at):], resume_at
    finally:
        listening.receiver.release.set()
        with_server = listening.server
        if with_server is not None:
            with_server.shutdown()
            with_server.server_close()
        for proc in workers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)

    delivered = sorted(got.values(), key=lambda e: e["sequence"])
    assert delivered == stream, "every event of the stream arrived, as the stream has it"
    _no_gaps(delivered, cid)
    mine = [(i, e) for i, e in receiver.deliveries if e["data"].get("conversation_id") == cid]
    ids_by_sequence: dict[int, set[str]] = {}
    for webhook_id, event in mine:
        assert webhook_id == event["id"]
        ids_by_sequence.setdefault(event["sequence"], set()).add(webhook_id)
    assert all(len(ids) == 1 for ids in ids_by_sequence.values()), ids_by_sequence  # no event with two ids
    assert {i for ids in ids_by_sequence.values() for i in ids} == {e["id"] for e in stream}
    assert receiver.counts.duplicates >= 1, "the interrupted delivery was sent again with its webhook-id"
    assert receiver.counts.bad_signature == 0
    types = [e["type"] for e in delivered]
    assert [t for t in types if t in MILESTONES] == list(MILESTONES), types
