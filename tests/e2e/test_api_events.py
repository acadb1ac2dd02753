"""A conversation's event stream over real HTTP: ``GET /conversations/{id}/events`` (server-sent
events) of a conversation that confirms a write above the approval threshold, which a supervisor
approves, then is cancelled, yields ``conversation.started``, ``confirmation.requested``,
``approval.requested``, ``approval.decided``, ``operation.applied`` and ``conversation.ended``
(status cancelled) in that order, numbered 1, 2, 3... without gaps, each frame's ``id:`` its
sequence and ``event:`` its type; ``Last-Event-ID`` resumes after it with only the later events;
a running conversation's stream sends what there is and ends after ``wait`` idle seconds; a
finished conversation's stream ends by itself; no payload holds the customer's email or name;
another tenant's conversation and an unknown id are the same 404; a ``Last-Event-ID`` that is no
number is a 422. A standalone refund's stream (``GET /refunds/{id}/events``) yields
``operation.applied`` then ``refund.completed`` with the refund id and resumes the same way.

Bad ``Last-Event-ID``s, on both streams: not a number (422), above the stream's last event
(409 naming the last, and the stream read afterwards is whole and unchanged), in a truncated
range (the conversation's events erased from the journal while its run is retained: a 409 naming
0, and the stream from the start is empty and ends); another tenant's refund stream is the 404
of an unknown refund, word for word.

The API served by uvicorn on a loopback port (``api_beside``) with API keys of two tenants, a
real worker (the offline model) and a real Temporal dev server.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from types import SimpleNamespace
from typing import AsyncIterator

import httpx
import pytest

from activities.store.api_keys import KeyStore, Role
from settings import Settings
from starter.api.auth import access_from_settings
from starter.api.server import api_beside
from tests.api_stack import keyed_stack, open_conversation
from tests.policy_fixtures import EMAIL, PENDING
from tests.ports import free_port

NAME_PARTS = ("raj", "sanchez")
"""The customer of ``EMAIL`` (raj_sanchez_2970): never in an event."""


@pytest.fixture(scope="module")
async def stack(temporal_env, tmp_path_factory) -> AsyncIterator[SimpleNamespace]:
    from starter.runtime.worker import build_backend, build_worker

    tmp = tmp_path_factory.mktemp("events")
    settings = Settings(database_url=f"sqlite:///{tmp / 'sor.sqlite'}", data_dir=tmp, anthropic_api_key=None,
                        task_queue=f"events-{uuid.uuid4().hex[:8]}", sandbox_project_modules=True)
    backend = build_backend(settings)
    keys = KeyStore(settings.resolved_journal_url(), settings.api_key_hmac_secret())
    made = {"svc": keys.create("default", Role.SERVICE), "op": keys.create("default", Role.OPERATOR),
            "acme_svc": keys.create("acme", Role.SERVICE)}
    access = access_from_settings(settings, "127.0.0.1")
    async with build_worker(temporal_env.client, settings, backend):
        async with api_beside(temporal_env.client, settings, host="127.0.0.1", port=free_port(),
                              access=access) as url:
            async with httpx.AsyncClient(base_url=url, timeout=60.0) as http:
                yield SimpleNamespace(http=http, journal_url=settings.resolved_journal_url(),
                                      headers={n: {"Authorization": f"Bearer {k}"} for n, (_, k) in made.items()})


async def _stream(s, cid: str, who: str = "svc", last: str | None = None, process: str = "conversations",
                  **params) -> list[dict]:
    """The frames of one whole stream (it must end by itself within the client's timeout):
    each ``{"id", "event", "data"}``, keep-alive comments left out."""
    response = await _get(s, f"/{process}/{cid}/events", who, last, **params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = []
    for block in response.text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if fields:
            frames.append({"id": fields["id"], "event": fields["event"], "data": json.loads(fields["data"])})
    return frames


async def _get(s, path: str, who: str = "svc", last: str | None = None, **params) -> httpx.Response:
    headers = {**s.headers[who], **({"Last-Event-ID": last} if last is not None else {})}
    return await asyncio.wait_for(s.http.get(path, params=params, headers=headers), 30)


def _check_frames(frames: list[dict], cid: str, first: int = 1, key: str = "conversation_id") -> None:
    for n, frame in enumerate(frames, start=first):
        event = frame["data"]
        assert set(event) == {"id", "type", "timestamp", "sequence", "data"}
        assert event["sequence"] == n and frame["id"] == str(n), "numbered from 1 without gaps"
        assert frame["event"] == event["type"] and event["data"][key] == cid
        assert event["id"].startswith("evt_")
    assert len({f["data"]["id"] for f in frames}) == len(frames)


async def test_a_confirmed_and_approved_write_streams_its_events_in_order_and_resumes(stack):
    s = stack
    cid, say = await open_conversation(s, f"Hi, my email is {EMAIL}")

    await say(f"Please cancel order {PENDING}, I ordered it by mistake")
    approval_id = (await say("yes"))["awaiting_approval"]
    assert approval_id

    # running: what there is so far, then the stream ends after one idle second
    so_far = await _stream(s, cid, wait=1)
    _check_frames(so_far, cid)
    assert [f["event"] for f in so_far][-2:] == ["approval.requested", "conversation.replied"]

    decided = await s.http.post(f"/approvals/{approval_id}", json={"decision": "approve", "approver": "sup-ana"},
                                headers=s.headers["op"])
    assert decided.status_code == 200, decided.text
    cancelled = await s.http.post(f"/conversations/{cid}/cancel", json={"reason": "done"}, headers=s.headers["op"])
    assert cancelled.status_code == 202, cancelled.text

    # finished: the stream ends by itself after the last event (no wait given)
    for _ in range(100):
        frames = await _stream(s, cid, wait=0)
        if frames and frames[-1]["event"] == "conversation.ended":
            break
        await asyncio.sleep(0.2)
    whole = await _stream(s, cid)
    assert whole == frames
    _check_frames(whole, cid)
    types = [f["event"] for f in whole]
    milestones = ["conversation.started", "confirmation.requested", "approval.requested", "approval.decided",
                  "operation.applied", "conversation.ended"]
    assert [t for t in types if t in milestones] == milestones, types
    assert whole[:len(so_far)] == so_far  # the same ids, sequences and times as read while it ran
    by_type = {f["event"]: f["data"]["data"] for f in whole}
    assert by_type["approval.requested"]["approval_id"] == approval_id
    assert by_type["approval.requested"]["amount"] == "826.70" and by_type["approval.requested"]["order_id"] == PENDING
    assert by_type["confirmation.requested"]["order_id"] == PENDING
    assert by_type["approval.decided"]["decision"] == "approved"
    assert by_type["operation.applied"]["tool"] == "cancel_pending_order"
    assert by_type["conversation.ended"]["status"] == "cancelled"

    text = json.dumps(whole).lower()
    assert EMAIL.lower() not in text and not any(part in text for part in NAME_PARTS)

    # resuming after approval.requested: only the later events
    resume_at = next(f["id"] for f in whole if f["event"] == "approval.requested")
    later = await _stream(s, cid, last=resume_at)
    assert later == whole[int(resume_at):]
    assert await _stream(s, cid, last=str(len(whole))) == []  # nothing after the last: ends at once
    assert await _stream(s, cid, last="") == whole  # an empty id is no id: from the start

    # another tenant's conversation and an unknown id: the same 404; a Last-Event-ID that is no number: 422
    for who, asked in (("acme_svc", cid), ("svc", f"nobody-{uuid.uuid4().hex[:8]}")):
        response = await s.http.get(f"/conversations/{asked}/events", headers=s.headers[who])
        assert response.status_code == 404, response.text
        assert cid not in response.text or asked == cid
    bad = await s.http.get(f"/conversations/{cid}/events", headers={**s.headers["svc"], "Last-Event-ID": "x7"})
    assert bad.status_code == 422 and "Last-Event-ID" in bad.json()["detail"]


SMALL_PENDING = "#W5694685"
"""A pending order of 98.25 (evelyn_kovacs_6742): below the approval threshold."""


async def test_a_refunds_stream_yields_its_outcome_and_refuses_bad_resumes(stack):
    s = stack
    body = {"request_id": f"events-{uuid.uuid4().hex[:8]}", "order_id": SMALL_PENDING, "operation": "cancel",
            "reason": "no longer needed"}
    started = await s.http.post("/refunds", json=body, headers=s.headers["svc"])
    assert started.status_code == 202, started.text
    refund_id = started.json()["refund_id"]
    for _ in range(100):
        frames = await _stream(s, refund_id, process="refunds", wait=0)
        if frames and frames[-1]["event"] == "refund.completed":
            break
        await asyncio.sleep(0.2)
    whole = await _stream(s, refund_id, process="refunds")  # finished: ends by itself
    _check_frames(whole, refund_id, key="refund_id")
    assert [f["event"] for f in whole] == ["operation.applied", "refund.completed"]
    applied, completed = (f["data"]["data"] for f in whole)
    assert applied["amount"] == completed["amount"] == "98.25" and applied["order_id"] == SMALL_PENDING
    assert completed["status"] == "applied"
    assert not any(part in json.dumps(whole).lower() for part in ("evelyn", "kovacs"))

    assert await _stream(s, refund_id, process="refunds", last="1") == whole[1:]
    assert await _stream(s, refund_id, process="refunds", last="2") == []
    ahead = await _get(s, f"/refunds/{refund_id}/events", last="3")
    assert ahead.status_code == 409 and "last event of this stream (2)" in ahead.json()["detail"]
    bad = await _get(s, f"/refunds/{refund_id}/events", last="-1")
    assert bad.status_code == 422 and "Last-Event-ID" in bad.json()["detail"]
    assert await _stream(s, refund_id, process="refunds") == whole  # nothing changed by the refusals

    # another tenant's refund is the 404 of a refund that does not exist, word for word
    theirs = await _get(s, f"/refunds/{refund_id}/events", who="acme_svc")
    unknown_id = refund_id[:-4] + "ffff"
    unknown = await _get(s, f"/refunds/{unknown_id}/events")
    assert theirs.status_code == unknown.status_code == 404
    assert theirs.json()["detail"].replace(refund_id, "ID") == unknown.json()["detail"].replace(unknown_id, "ID")
    assert "98.25" not in theirs.text and SMALL_PENDING not in theirs.text


async def test_a_last_event_id_ahead_of_the_stream_or_in_a_truncated_range_is_a_409(stack):
    s = stack
    opened = await s.http.post("/conversations", json={"text": "Hello"}, headers=s.headers["svc"])
    assert opened.status_code == 201, opened.text
    cid = opened.json()["conversation_id"]
    cancelled = await s.http.post(f"/conversations/{cid}/cancel", json={"reason": "done"}, headers=s.headers["op"])
    assert cancelled.status_code == 202, cancelled.text
    for _ in range(100):
        whole = await _stream(s, cid, wait=0)
        if whole and whole[-1]["event"] == "conversation.ended":
            break
        await asyncio.sleep(0.2)
    _check_frames(whole, cid)
    last = len(whole)

    for ahead in (str(last + 1), "999999999999999999"):
        refused = await _get(s, f"/conversations/{cid}/events", last=ahead)
        assert refused.status_code == 409, refused.text
        assert f"Last-Event-ID {ahead} is past the last event of this stream ({last})" in refused.json()["detail"]
    assert await _stream(s, cid) == whole and await _stream(s, cid, last=str(last)) == []

    # retention or erasure removes a conversation's events whole: with its run still retained,
    # an id from before is in a range the journal no longer holds
    from activities.store.journal import JournalStore

    erased = await asyncio.to_thread(JournalStore(s.journal_url).erase_conversation, cid)
    assert erased.events == last
    truncated = await _get(s, f"/conversations/{cid}/events", last="2")
    assert truncated.status_code == 409 and "last event of this stream (0)" in truncated.json()["detail"]
    assert await _stream(s, cid) == []  # from the start: nothing left, and the closed run's stream ends


async def test_an_open_stream_ends_when_the_api_stops(temporal_env, tmp_path):
    """uvicorn waits for open responses before it stops: a stream left open (a running
    conversation, ``wait`` 300 s) ends within a poll of the server stopping, so a shutdown takes
    seconds, not the stream's wait."""
    async with keyed_stack(temporal_env, tmp_path, {"svc": ("default", Role.SERVICE)}) as s:
        cid, _ = await open_conversation(s, "Hello")
        opened = asyncio.Event()

        async def read() -> str:  # on its own connection: the stack's client closes with the stack
            async with httpx.AsyncClient(base_url=s.url, timeout=60.0) as http, http.stream(
                    "GET", f"/conversations/{cid}/events", params={"wait": 300}, headers=s.headers["svc"]) as response:
                opened.set()
                return "".join([chunk async for chunk in response.aiter_text()])

        reading = asyncio.create_task(read())
        await asyncio.wait_for(opened.wait(), 30)
        await asyncio.sleep(1)
        stopped_at = time.monotonic()
    assert time.monotonic() - stopped_at < 10  # the API stopped with the stream open
    text = await asyncio.wait_for(reading, 10)
    assert "event: conversation.started" in text
