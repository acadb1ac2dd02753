"""Limits per key and per tenant over real HTTP: the API served by uvicorn on a loopback port
with keys and limits from its settings (``access_from_settings``, as ``statekeeper api``
builds them), a real worker (whose reads of a customer by email take 1.5 s, so a request can
be caught in flight) and a real Temporal dev server.

Tenants: ``default`` (store ``main``), ``busy`` (store ``busy-store``, 5 open conversations at
most) and ``thrifty`` (store ``thrifty-store``, 1 token a day: spent by its first model call).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from types import SimpleNamespace
from typing import AsyncIterator

import httpx
import pytest
import sqlalchemy as sa

from activities.retail_port import RetailPort
from activities.store.api_keys import KeyStore, Role
from activities.store.tables import make_engine, model_calls
from activities.tools import ToolActivities
from settings import Settings, TenantLimits
from starter.api.auth import access_from_settings
from starter.api.server import api_beside
from tests.faults import SlowReads
from tests.policy_fixtures import EMAIL
from workflows.conversation.budget import TENANT_BUDGET_REPLY
from tests.ports import free_port

BURST_PER_MINUTE = 60
BUSY_OPEN = 5


@pytest.fixture(scope="module")
async def stack(temporal_env, tmp_path_factory) -> AsyncIterator[SimpleNamespace]:
    from starter.runtime.worker import build_backend, build_worker

    tmp = tmp_path_factory.mktemp("limits")
    settings = Settings(database_url=f"sqlite:///{tmp / 'sor.sqlite'}", data_dir=tmp, anthropic_api_key=None,
                        task_queue=f"limits-{uuid.uuid4().hex[:8]}", sandbox_project_modules=True,
                        store_tenants={"busy-store": "busy", "thrifty-store": "thrifty"},
                        tenant_limits={"busy": TenantLimits(open_conversations=BUSY_OPEN),
                                       "thrifty": TenantLimits(daily_tokens=1)})
    backend = build_backend(settings)
    for store in ("busy-store", "thrifty-store"):
        backend.seed_store(store)
    port = RetailPort(backend)
    slow = SlowReads(1.5, frozenset({"find_user_id_by_email"})).attach(port)
    tools = ToolActivities(tools=slow, outbox=port, tickets=port)
    keys = KeyStore(settings.resolved_journal_url(), settings.api_key_hmac_secret())
    made = {
        "burst": keys.create("default", Role.SERVICE, requests_per_minute=BURST_PER_MINUTE),
        "op": keys.create("default", Role.OPERATOR, requests_per_minute=100_000),
        "busy": keys.create("busy", Role.SERVICE, requests_per_minute=100_000),
        "thrifty": keys.create("thrifty", Role.OPERATOR),
        "revoked": keys.create("default", Role.SERVICE),
    }
    access = access_from_settings(settings, "127.0.0.1")
    async with build_worker(temporal_env.client, settings, backend, tools=tools):
        async with api_beside(temporal_env.client, settings, host="127.0.0.1", port=free_port(),
                              access=access) as url:
            limits = httpx.Limits(max_connections=250, max_keepalive_connections=250)
            async with httpx.AsyncClient(base_url=url, timeout=120.0, limits=limits) as http:
                yield SimpleNamespace(http=http, keys=keys, temporal=temporal_env.client, settings=settings,
                                      ids={n: r.key_id for n, (r, _) in made.items()},
                                      headers={n: {"Authorization": f"Bearer {k}"} for n, (_, k) in made.items()})


async def _eventually(check, seconds: float = 30.0):
    for _ in range(int(seconds / 0.25)):
        result = await check()
        if result:
            return result
        await asyncio.sleep(0.25)
    return await check()


async def _user_messages(s, cid: str, who: str = "op") -> Counter:
    """How often each message id is in the conversation's transcript as the user's message (the
    transcript names a message by its update id, ``msg-<message id>``)."""
    response = await s.http.get(f"/conversations/{cid}/transcript", headers=s.headers[who])
    if response.status_code == 404:
        return Counter()
    assert response.status_code == 200, response.text
    return Counter((e["message_id"] or "").removeprefix("msg-") for e in response.json()["entries"]
                   if e["role"] == "user")


async def test_200_messages_in_10_s_from_one_key_get_429s_after_its_limit_and_each_accepted_one_is_answered_once(
        stack):
    s = stack
    cids = [f"burst-{i}-{uuid.uuid4().hex[:6]}" for i in range(10)]
    for cid in cids:  # opened by another key of the tenant: the burst key's budget is all for messages
        response = await s.http.post("/conversations", json={"conversation_id": cid}, headers=s.headers["op"])
        assert response.status_code == 201, response.text

    async def send(i: int) -> tuple[str, str, httpx.Response]:
        await asyncio.sleep(i * 0.05)  # 200 messages over 10 s
        cid, mid = cids[i % len(cids)], f"m-{i}"
        return cid, mid, await s.http.post(f"/conversations/{cid}/messages", json={"text": f"hello {i}",
                                                                                    "message_id": mid},
                                           headers=s.headers["burst"])

    began = time.monotonic()
    sent = await asyncio.gather(*(send(i) for i in range(200)))
    assert time.monotonic() - began < 60
    statuses = Counter(r.status_code for _, _, r in sent)
    assert set(statuses) <= {200, 429}, statuses
    accepted = [(cid, mid) for cid, mid, r in sent if r.status_code == 200]
    # a burst of the limit at once, then one a second: 60 + about 10 in 10 s, never more
    assert BURST_PER_MINUTE <= len(accepted) <= BURST_PER_MINUTE + 12, statuses
    for _, _, r in sent:
        if r.status_code == 429:
            assert 1 <= int(r.headers["retry-after"]) <= 60, r.headers
            assert "too many requests" in r.json()["detail"] and r.headers["refusal-kind"] == "rate_limited"
            assert "Traceback" not in r.text
    # nothing lost: every accepted message is in its transcript exactly once, no refused one at all
    refused = {(cid, mid) for cid, mid, r in sent if r.status_code == 429}
    for cid in cids:
        mine = {mid for c, mid in accepted if c == cid}

        async def all_there(cid=cid, mine=mine):
            seen = await _user_messages(s, cid)
            return seen if mine <= set(seen) else None
        seen = await all_there() if not mine else await _eventually(all_there)
        assert seen is not None, cid
        assert all(seen[mid] == 1 for mid in mine), seen
        assert not {mid for c, mid in refused if c == cid} & set(seen)
    # the key is still limited, another key of the tenant is not
    again = await s.http.post(f"/conversations/{cids[0]}/messages", json={"text": "hi"}, headers=s.headers["burst"])
    other = await s.http.get("/usage", headers=s.headers["op"])
    assert other.status_code == 200 and other.json()["requests_per_minute"] == 100_000
    assert again.status_code in (200, 429)


async def test_100_conversations_opened_at_once_by_one_tenant_exactly_its_limit_start(stack):
    s = stack
    run = uuid.uuid4().hex[:6]

    async def open_one(i: int) -> httpx.Response:
        return await s.http.post("/conversations", json={"conversation_id": f"busy-{run}-{i}", "store": "busy-store"},
                                 headers=s.headers["busy"])

    answers = await asyncio.gather(*(open_one(i) for i in range(100)))
    statuses = Counter(r.status_code for r in answers)
    assert statuses == {201: BUSY_OPEN, 429: 100 - BUSY_OPEN}, statuses
    started = {r.json()["conversation_id"] for r in answers if r.status_code == 201}
    for r in answers:
        if r.status_code == 429:
            assert f"at its limit of {BUSY_OPEN} open conversations" in r.json()["detail"]
    # nothing lost, nothing extra: exactly the accepted ones run
    running = await s.temporal.count_workflows(f'WorkflowId STARTS_WITH "support-busy-{run}-" '
                                               'AND ExecutionStatus = "Running"')

    async def listed():
        count = (await s.temporal.count_workflows(f'WorkflowId STARTS_WITH "support-busy-{run}-"')).count
        return count if count == BUSY_OPEN else None
    assert await _eventually(listed) == BUSY_OPEN and running.count <= BUSY_OPEN
    # a repeat of an accepted start is no new conversation: it is answered, not refused
    again = await s.http.post("/conversations", json={"conversation_id": sorted(started)[0], "store": "busy-store"},
                              headers=s.headers["busy"])
    assert again.status_code == 201, again.text
    usage = (await s.http.get("/usage", headers=s.headers["busy"])).json()
    assert usage["tenant"] == "busy" and usage["open_conversations"] == BUSY_OPEN
    assert usage["open_conversations_limit"] == BUSY_OPEN and usage["daily_tokens_limit"] is None


async def test_a_tenant_at_its_daily_budget_gets_a_clear_reply_and_no_model_call(stack):
    s = stack
    cid = f"thrifty-{uuid.uuid4().hex[:8]}"
    first = await s.http.post("/conversations", json={"conversation_id": cid, "store": "thrifty-store",
                                                      "text": "hello"}, headers=s.headers["thrifty"])
    assert first.status_code == 201, first.text
    assert first.json()["reply"]["text"] != TENANT_BUDGET_REPLY  # under the cap: the model answered
    engine = make_engine(s.settings.resolved_journal_url())

    def calls() -> int:
        with engine.connect() as conn:
            return conn.execute(sa.select(sa.func.count()).select_from(model_calls)
                                .where(model_calls.c.conversation_id == cid)).scalar_one()

    before_state = (await s.http.get(f"/conversations/{cid}", headers=s.headers["thrifty"])).json()
    before = await asyncio.to_thread(calls)
    assert before >= 1
    reply = await s.http.post(f"/conversations/{cid}/messages", json={"text": "what can you do?", "message_id": "m-2"},
                              headers=s.headers["thrifty"])
    assert reply.status_code == 200, reply.text
    assert reply.json()["text"] == TENANT_BUDGET_REPLY
    after_state = (await s.http.get(f"/conversations/{cid}", headers=s.headers["thrifty"])).json()
    assert after_state["usage"]["model_calls"] == before_state["usage"]["model_calls"]
    assert await asyncio.to_thread(calls) == before
    assert after_state["status"] == "active"  # not handed over: it goes on tomorrow
    # the message is not lost: it is in the transcript once, and a repeat returns the same reply
    assert (await _user_messages(s, cid, "thrifty"))["m-2"] == 1
    repeat = await s.http.post(f"/conversations/{cid}/messages", json={"text": "what can you do?",
                                                                       "message_id": "m-2"},
                               headers=s.headers["thrifty"])
    assert repeat.json()["text"] == TENANT_BUDGET_REPLY
    usage = (await s.http.get("/usage", headers=s.headers["thrifty"])).json()
    assert usage["daily_tokens_limit"] == 1 and usage["tokens_today"] >= 1
    engine.dispose()


async def test_a_key_revoked_while_its_request_is_in_flight_finishes_that_request_once_then_is_refused(stack):
    s = stack
    cid = f"revoke-{uuid.uuid4().hex[:8]}"
    request = asyncio.create_task(s.http.post(
        "/conversations", json={"conversation_id": cid, "text": f"Hi, my email is {EMAIL}", "message_id": "m-1"},
        headers=s.headers["revoked"]))

    async def in_flight():  # the conversation runs: the request was let in and its read is under way
        return (await s.temporal.count_workflows(f'WorkflowId = "support-{cid}"')).count == 1
    assert await _eventually(in_flight, 10)
    assert not request.done()
    assert await asyncio.to_thread(s.keys.revoke, s.ids["revoked"])
    answer = await request
    assert answer.status_code == 201, answer.text  # let in before the revocation: served whole
    assert answer.json()["reply"]["text"]
    assert (await _user_messages(s, cid))["m-1"] == 1
    after = await s.http.post(f"/conversations/{cid}/messages", json={"text": "yes", "message_id": "m-2"},
                              headers=s.headers["revoked"])
    assert after.status_code == 401 and "not valid" in after.json()["detail"]
    assert "m-2" not in await _user_messages(s, cid)
