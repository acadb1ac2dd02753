"""Webhooks end to end over real HTTP: the API served by uvicorn on a loopback port with API keys
of two tenants, a real worker (the offline model) on a real Temporal dev server, and real
receivers on loopback ports (``tests.webhook_receiver``; the stack allows loopback receivers, as
``statekeeper dev`` does, and retries within seconds).

- Bad input: a URL that is not http(s), one that resolves to a private or link-local address,
  one over 2 KB and an unknown event type are 422s with their reason, and nothing is stored; a
  service key may not manage webhooks (403); another tenant's webhook is the same 404 as none.
- A conversation that confirms a write above the approval threshold, which a supervisor approves
  through the API, then is cancelled: the tenant's receiver gets ``approval.requested``,
  ``approval.decided``, ``operation.applied`` and ``conversation.ended`` among its events, each
  signed (verified with ``standardwebhooks``), deduplicated by ``webhook-id`` the same events
  with sequences without gaps as the conversation's event stream; the other tenant's receiver
  gets none of them; the deliveries list says delivered.
- A receiver that answers 503 for a while gets every event once it answers again; one down
  past the retries' end has its deliveries marked failed, and a manual retry delivers one with
  the same ``webhook-id``.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import datetime
from types import SimpleNamespace
from typing import AsyncIterator

import httpx
import pytest
from standardwebhooks import Webhook

from activities.store.api_keys import KeyStore, Role
from settings import Settings
from starter.api.auth import access_from_settings
from starter.api.server import api_beside
from tests.api_stack import open_conversation
from tests.policy_fixtures import EMAIL, PENDING
from tests.ports import free_port
from tests.webhook_receiver import Receiver, receiving

GIVE_UP_SECONDS = 6.0


@pytest.fixture(scope="module")
async def stack(temporal_env, tmp_path_factory) -> AsyncIterator[SimpleNamespace]:
    from starter.runtime.worker import build_backend, build_worker

    tmp = tmp_path_factory.mktemp("webhooks")
    settings = Settings(database_url=f"sqlite:///{tmp / 'sor.sqlite'}", data_dir=tmp, anthropic_api_key=None,
                        task_queue=f"webhooks-{uuid.uuid4().hex[:8]}", sandbox_project_modules=True,
                        webhook_allow_loopback=True, webhook_retry_initial_seconds=0.5,
                        webhook_retry_max_interval_seconds=1.0, webhook_give_up_seconds=GIVE_UP_SECONDS)
    backend = build_backend(settings)
    keys = KeyStore(settings.resolved_journal_url(), settings.api_key_hmac_secret())
    made = {"svc": keys.create("default", Role.SERVICE), "op": keys.create("default", Role.OPERATOR),
            "acme_op": keys.create("acme", Role.OPERATOR)}
    access = access_from_settings(settings, "127.0.0.1")
    with receiving() as receiver:
        async with build_worker(temporal_env.client, settings, backend):
            async with api_beside(temporal_env.client, settings, host="127.0.0.1", port=free_port(),
                                  access=access) as url:
                async with httpx.AsyncClient(base_url=url, timeout=60.0) as http:
                    yield SimpleNamespace(http=http, receiver=receiver, settings=settings,
                                          headers={n: {"Authorization": f"Bearer {k}"} for n, (_, k) in made.items()})


async def _subscribe(s, url: str, who: str = "op", events=("*",)) -> dict:
    response = await s.http.post("/webhooks", json={"url": url, "events": list(events)}, headers=s.headers[who])
    assert response.status_code == 201, response.text
    return response.json()


async def _listed(s, who: str = "op") -> list[dict]:
    response = await s.http.get("/webhooks", headers=s.headers[who])
    assert response.status_code == 200, response.text
    return response.json()["items"]


async def _conversation(s, approve: bool = True) -> str:
    """A conversation that confirms a cancel above the threshold, approved (or not) and then cancelled."""
    cid, say = await open_conversation(s, f"Hi, my email is {EMAIL}")

    await say(f"Please cancel order {PENDING}, I ordered it by mistake")
    approval_id = (await say("yes"))["awaiting_approval"]
    if approve:
        decided = await s.http.post(f"/approvals/{approval_id}", json={"decision": "approve", "approver": "sup-ana"},
                                    headers=s.headers["op"])
        assert decided.status_code == 200, decided.text
    cancelled = await s.http.post(f"/conversations/{cid}/cancel", json={"reason": "done"}, headers=s.headers["op"])
    assert cancelled.status_code == 202, cancelled.text
    return cid


async def _stream(s, cid: str) -> list[dict]:
    """The conversation's whole event stream, once it has ended."""
    for _ in range(150):
        response = await s.http.get(f"/conversations/{cid}/events", params={"wait": 0}, headers=s.headers["svc"])
        events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
        if events and events[-1]["type"] == "conversation.ended":
            return events
        await asyncio.sleep(0.2)
    raise AssertionError("the conversation did not end")


def _verified(receiver: Receiver, path: str, secret: str, cid: str) -> dict[str, dict]:
    """The events of ``cid`` that arrived at ``path``, each verified, deduplicated by webhook-id."""
    by_id: dict[str, dict] = {}
    for got in receiver.got(path):
        event = Webhook(secret).verify(got.body, got.headers)
        assert event["id"] == got.headers["webhook-id"]
        if event["data"].get("conversation_id") == cid:  # a refund's events carry refund_id
            assert by_id.get(event["id"], event) == event, "a redelivery carries the same event"
            by_id[event["id"]] = event
    return by_id


async def _refund_events_arrive(receiver: Receiver, path: str, secret: str, refund_id: str,
                                seconds: float = 60) -> list[dict]:
    """The verified events of refund ``refund_id`` at ``path``, by sequence, once its
    ``refund.completed`` arrived."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = {}
        for got in receiver.got(path):
            event = Webhook(secret).verify(got.body, got.headers)
            rid = event["data"].get("refund_id")
            if rid == refund_id and "conversation_id" not in event["data"]:
                found[event["id"]] = event
        if any(e["type"] == "refund.completed" for e in found.values()):
            return sorted(found.values(), key=lambda e: e["sequence"])
        await asyncio.sleep(0.2)
    raise AssertionError("the refund's events did not arrive")


async def _all_arrive(receiver: Receiver, path: str, secret: str, cid: str, count: int, seconds: float = 60) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = _verified(receiver, path, secret, cid)
        if len(got) >= count:
            return got
        await asyncio.sleep(0.2)
    raise AssertionError(f"{len(_verified(receiver, path, secret, cid))} of {count} events arrived at {path}")


async def test_bad_urls_and_event_types_are_refused_and_nothing_is_stored(stack):
    s = stack
    refused = [
        ("ftp://example.com/hook", "must start with http:// or https://"),
        ("http://10.0.0.7/hook", "private address"),
        ("http://192.168.1.20:8080/hook", "private address"),
        ("http://169.254.169.254/latest/meta-data/", "link-local address"),
        ("https://example.com/" + "a" * 2100, "at most 2048 characters"),
        ("http://user:secret@127.0.0.1/hook", "user name or password"),
    ]
    for url, reason in refused:
        response = await s.http.post("/webhooks", json={"url": url, "events": ["*"]}, headers=s.headers["op"])
        assert response.status_code == 422 and reason in response.json()["detail"], (url, response.text)
        assert "secret" not in response.text
    unknown = await s.http.post("/webhooks", json={"url": f"{s.receiver.url}/ok", "events": ["refund.done"]},
                                headers=s.headers["op"])
    assert unknown.status_code == 422 and "unknown event type" in unknown.json()["detail"]
    assert await _listed(s) == [] and await _listed(s, "acme_op") == []

    service = await s.http.post("/webhooks", json={"url": f"{s.receiver.url}/ok", "events": ["*"]},
                                headers=s.headers["svc"])
    assert service.status_code == 403 and "operator key" in service.json()["detail"]
    assert (await s.http.get("/webhooks", headers=s.headers["svc"])).status_code == 403
    assert await _listed(s) == []

    theirs = await _subscribe(s, f"{s.receiver.url}/ok", "acme_op")
    for method, path in (("DELETE", f"/webhooks/{theirs['webhook_id']}"),
                         ("GET", f"/webhooks/{theirs['webhook_id']}/deliveries"),
                         ("POST", f"/webhooks/{theirs['webhook_id']}/deliveries/evt_0/retry"),
                         ("DELETE", "/webhooks/wh_nothing")):
        response = await s.http.request(method, path, headers=s.headers["op"])
        assert response.status_code == 404 and "does not exist" in response.json()["detail"], (method, path)
    assert [w["webhook_id"] for w in await _listed(s, "acme_op")] == [theirs["webhook_id"]]
    assert (await s.http.delete(f"/webhooks/{theirs['webhook_id']}", headers=s.headers["acme_op"])).status_code == 204
    assert await _listed(s, "acme_op") == []


async def test_a_conversations_events_reach_its_tenants_receiver_signed_and_without_gaps(stack):
    s = stack
    ours = await _subscribe(s, f"{s.receiver.url}/ok")
    assert ours["secret"].startswith("whsec_") and ours["tenant"] == "default"
    assert all("secret" not in w for w in await _listed(s))
    theirs = await _subscribe(s, f"{s.receiver.url}/acme", "acme_op")
    only_ended = await _subscribe(s, f"{s.receiver.url}/ended", events=["conversation.ended"])

    cid = await _conversation(s)
    stream = await _stream(s, cid)
    got = await _all_arrive(s.receiver, "/ok", ours["secret"], cid, len(stream))
    delivered = sorted(got.values(), key=lambda e: e["sequence"])
    assert delivered == stream, "the same events, ids, sequences and times as the event stream"
    assert [e["sequence"] for e in delivered] == list(range(1, len(stream) + 1))
    types = [e["type"] for e in delivered]
    for milestone in ("approval.requested", "approval.decided", "operation.applied", "conversation.ended"):
        assert milestone in types, types
    ended = await _all_arrive(s.receiver, "/ended", only_ended["secret"], cid, 1)
    assert [e["type"] for e in ended.values()] == ["conversation.ended"]
    assert _verified(s.receiver, "/acme", theirs["secret"], cid) == {}
    # the refund the approved cancel ran reports to the same subscription, signed, as its own stream
    state = (await s.http.get(f"/conversations/{cid}", headers=s.headers["svc"])).json()
    [refund_id] = [op["child_workflow_id"] for op in state["completed_operations"] if op.get("child_workflow_id")]
    refunds = await _refund_events_arrive(s.receiver, "/ok", ours["secret"], refund_id)
    assert "refund.completed" in [e["type"] for e in refunds], refunds
    assert EMAIL.lower() not in json.dumps(delivered).lower()

    listed = await s.http.get(f"/webhooks/{ours['webhook_id']}/deliveries", headers=s.headers["op"])
    assert listed.status_code == 200
    mine = [d for d in listed.json()["items"] if d["conversation_id"] == cid]
    assert sorted(d["sequence"] for d in mine) == list(range(1, len(stream) + 1))
    assert {d["status"] for d in mine} == {"delivered"} and {d["last_status_code"] for d in mine} == {200}
    assert {d["delivery_id"] for d in mine} == set(got)

    lags = sorted(r.at - datetime.fromisoformat(json.loads(r.body)["timestamp"]).timestamp()
                  for r in s.receiver.got("/ok") if json.loads(r.body)["data"].get("conversation_id") == cid)
    print(f"delivery lag from the event's timestamp: p50 {lags[len(lags) // 2]:.3f} s, max {lags[-1]:.3f} s")
    for hook in (ours, only_ended):
        assert (await s.http.delete(f"/webhooks/{hook['webhook_id']}", headers=s.headers["op"])).status_code == 204
    await s.http.delete(f"/webhooks/{theirs['webhook_id']}", headers=s.headers["acme_op"])


async def test_a_receiver_down_for_a_while_gets_everything_and_a_failed_delivery_can_be_retried(stack):
    s = stack
    with receiving() as flaky, receiving() as gone:
        flaky.down.set()
        gone.down.set()
        back = await _subscribe(s, f"{flaky.url}/switch")
        late = await _subscribe(s, f"{gone.url}/switch", events=["conversation.started"])
        cid = await _conversation(s, approve=False)
        stream = await _stream(s, cid)
        await asyncio.sleep(3)  # down: every attempt answered 503
        pending = (await s.http.get(f"/webhooks/{back['webhook_id']}/deliveries",
                                    params={"status": "pending"}, headers=s.headers["op"])).json()["items"]
        assert pending and all(d["last_status_code"] == 503 and d["attempts"] >= 1 for d in pending)
        flaky.down.clear()
        got = await _all_arrive(flaky, "/switch", back["secret"], cid, len(stream))
        assert sorted(got.values(), key=lambda e: e["sequence"]) == stream

        # the other stays down past the retries' end: failed, then retried by hand once it is back
        for _ in range(100):
            items = (await s.http.get(f"/webhooks/{late['webhook_id']}/deliveries",
                                      headers=s.headers["op"])).json()["items"]
            if items and items[0]["status"] == "failed":
                break
            await asyncio.sleep(0.2)
        (failed,) = items
        assert failed["status"] == "failed" and failed["attempts"] >= 2 and failed["last_status_code"] == 503
        gone.down.clear()
        retried = await s.http.post(f"/webhooks/{late['webhook_id']}/deliveries/{failed['delivery_id']}/retry",
                                    headers=s.headers["op"])
        assert retried.status_code == 202 and retried.json()["status"] == "pending", retried.text
        arrived = await _all_arrive(gone, "/switch", late["secret"], cid, 1)
        assert list(arrived) == [failed["delivery_id"]]
        for _ in range(50):
            done = (await s.http.get(f"/webhooks/{late['webhook_id']}/deliveries", headers=s.headers["op"])).json()
            if done["items"][0]["status"] == "delivered":
                break
            await asyncio.sleep(0.2)
        assert done["items"][0]["status"] == "delivered" and done["items"][0]["attempts"] == failed["attempts"] + 1
