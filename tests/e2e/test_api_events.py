"""A conversation's event stream over real HTTP: ``GET /conversations/{id}/events`` (server-sent
events) of a conversation that confirms a write above the approval threshold, which a supervisor
approves, then is cancelled, yields ``conversation.started``, ``confirmation.requested``,
``approval.requested``, ``approval.decided``, ``operation.applied`` and ``conversation.ended``
(status cancelled) in that order, numbered 1, 2, 3... without gaps, each frame's ``id:`` its
sequence and ``event:`` its type; ``Last-Event-ID`` resumes after it with only the later events;
a running conversation's stream sends what there is and ends after ``wait`` idle seconds; a
finished conversation's stream ends by itself; no payload holds the customer's email or name;
another tenant's conversation and an unknown id are the same 404; a ``Last-Event-ID`` that is no
number is a 422.

The API served by uvicorn on a loopback port (``api_beside``) with API keys of two tenants, a
real worker (the offline model) and a real Temporal dev server.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from types import SimpleNamespace
from typing import AsyncIterator

import httpx
import pytest

from activities.store.api_keys import KeyStore, Role
from settings import Settings
from starter.api.auth import access_from_settings
from starter.api.server import api_beside
from tests.policy_fixtures import EMAIL, PENDING
from tests.ports import free_port

NAME_PARTS = ("raj", "sanchez")
"""The customer of ``EMAIL`` (raj_sanchez_7340): never in an event."""


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
                yield SimpleNamespace(http=http, headers={n: {"Authorization": f"Bearer {k}"}
                                                          for n, (_, k) in made.items()})


async def _stream(s, cid: str, who: str = "svc", last: str | None = None, **params) -> list[dict]:
    """The frames of one whole stream (it must end by itself within the client's timeout):
    each ``{"id", "event", "data"}``, keep-alive comments left out."""
    headers = {**s.headers[who], **({"Last-Event-ID": last} if last is not None else {})}
    response = await asyncio.wait_for(s.http.get(f"/conversations/{cid}/events", params=params, headers=headers), 30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = []
    for block in response.text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if fields:
            frames.append({"id": fields["id"], "event": fields["event"], "data": json.loads(fields["data"])})
    return frames


def _check_frames(frames: list[dict], cid: str, first: int = 1) -> None:
    for n, frame in enumerate(frames, start=first):
        event = frame["data"]
        assert set(event) == {"id", "type", "timestamp", "sequence", "data"}
        assert event["sequence"] == n and frame["id"] == str(n), "numbered from 1 without gaps"
        assert frame["event"] == event["type"] and event["data"]["conversation_id"] == cid
        assert event["id"].startswith("evt_")
    assert len({f["data"]["id"] for f in frames}) == len(frames)


async def test_a_confirmed_and_approved_write_streams_its_events_in_order_and_resumes(stack):
    s = stack
    opened = await s.http.post("/conversations", json={"text": f"Hi, my email is {EMAIL}"}, headers=s.headers["svc"])
    assert opened.status_code == 201, opened.text
    cid = opened.json()["conversation_id"]

    async def say(text: str) -> dict:
        response = await s.http.post(f"/conversations/{cid}/messages", json={"text": text}, headers=s.headers["svc"])
        assert response.status_code == 200, response.text
        return response.json()

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
