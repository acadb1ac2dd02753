"""The HTTP API on conversations started with a saved state (by a backend's Python client:
the API itself never accepts a state, which could claim an authenticated customer), over
real HTTP semantics (httpx ASGI transport), a real Temporal dev server and worker.

A state of version 1 is migrated: the API answers it in the current version, money as cent
text. A state this version cannot load is a 409 with a readable reason on every route of
that conversation, never a 503 "unavailable".
"""

from __future__ import annotations

import uuid
from typing import AsyncIterator

import httpx
import pytest

from starter.api.application import create_app
from starter.client.conversations import StatekeeperClient
from tests.core.test_migrations import as_v1, current_state
from starter.client.errors import ConversationError
from tests.policy_fixtures import DELIVERED, EMAIL, PENDING
from workflows.domain.state import SCHEMA_VERSION

REASON = ("the conversation's saved state cannot be loaded: saved by a newer version (99) than this worker "
          "understands (3); run a newer worker")


@pytest.fixture
async def stack(temporal_env, settings) -> AsyncIterator[tuple[httpx.AsyncClient, StatekeeperClient, object]]:
    """(http client, the API's Python client, retail backend) over a worker on the test's queue."""
    from starter.runtime.worker import build_backend, build_worker

    backend = build_backend(settings)
    client = StatekeeperClient(temporal_env.client, settings.task_queue)
    async with build_worker(temporal_env.client, settings, backend):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(lambda: client),
                                                                   raise_app_exceptions=False),
                                     base_url="http://statekeeper.test", timeout=60.0) as http:
            yield http, client, backend


def saved(cid: str, version: int) -> dict:
    state = current_state()
    state.conversation_id = cid
    dump = as_v1(state.model_dump(mode="json"))
    dump["schema_version"] = version
    return dump


async def test_a_migrated_conversation_is_served_in_the_current_version(stack):
    http, client, _ = stack
    cid = await client.start_conversation(f"api-v1-{uuid.uuid4().hex[:6]}", state=saved("x", 1))
    got = await http.get(f"/conversations/{cid}")
    assert got.status_code == 200, got.text
    body = got.json()
    v1 = saved("x", 1)
    assert body["schema_version"] == SCHEMA_VERSION
    assert body["orders"][DELIVERED]["total"] == f"{v1['orders'][DELIVERED]['total']:.2f}"
    assert [i["price"] for i in body["orders"][PENDING]["items"]] == [
        f"{i['price']:.2f}" for i in v1["orders"][PENDING]["items"]]
    assert len(body["completed_operations"]) == 1 and len(body["pinned_facts"]) == len(v1["pinned_facts"])
    sent = await http.post(f"/conversations/{cid}/messages", json={"text": f"What is the status of {DELIVERED}?"})
    assert sent.status_code == 200 and f"Total ${body['orders'][DELIVERED]['total']}" in sent.json()["text"]


async def test_an_unloadable_state_is_a_409_with_its_reason_on_every_route(stack):
    http, client, backend = stack
    cid = f"api-v99-{uuid.uuid4().hex[:6]}"
    with pytest.raises(ConversationError) as caught:
        await client.start_conversation(cid, state=saved(cid, 99))
    assert caught.value.kind == "state_incompatible" and str(caught.value) == REASON
    answers = [
        await http.get(f"/conversations/{cid}"),
        await http.post(f"/conversations/{cid}/messages", json={"text": f"Hi, my email is {EMAIL}"}),
        await http.post(f"/conversations/{cid}/cancel", json={"reason": "stop"}),
        await http.post("/conversations", json={"conversation_id": cid}),
        await http.post("/conversations", json={"conversation_id": cid, "text": "hello"}),
    ]
    for answer in answers:
        assert answer.status_code == 409, (answer.request.url, answer.text)
        assert answer.json() == {"detail": REASON}
    assert backend.ledger_entries("main") == []


async def test_the_openapi_documents_the_409_of_the_conversation_routes(stack):
    http, _, _ = stack
    paths = (await http.get("/openapi.json")).json()["paths"]
    for path, method in [("/conversations", "post"), ("/conversations/{conversation_id}", "get"),
                         ("/conversations/{conversation_id}/messages", "post"),
                         ("/conversations/{conversation_id}/cancel", "post")]:
        described = paths[path][method]["responses"]["409"]["description"]
        assert "state_incompatible" in described and "newer version" in described
