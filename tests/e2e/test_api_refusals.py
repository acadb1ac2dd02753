"""Refusals of the HTTP API (real app, real Temporal dev server, real worker): an unknown
conversation is a 404 whatever its id; malformed or unencodable bodies are a 422 with a
string reason; empty, oversized and finished-conversation messages are refused.

docs/api.md: refusals are 422 (empty, over 8 KB), 409 (finished), 404 (unknown), 503 (Temporal
down), each with ``{"detail": reason}``.

The cases come from an adversarial review of the code of that day; each docstring
describes the defect as it was found (file:line references are as of the review). All
are fixed now, and each test keeps guarding against its return.
"""

from __future__ import annotations

import uuid
from typing import AsyncIterator

import httpx
import pytest

from settings import Settings
from starter.api.application import create_app
from starter.client.conversations import StatekeeperClient


@pytest.fixture
async def api(temporal_env, tmp_path) -> AsyncIterator[httpx.AsyncClient]:
    from starter.runtime.worker import build_worker

    settings = Settings(database_url=f"sqlite:///{tmp_path}/db.sqlite", task_queue=f"brk-{uuid.uuid4().hex}",
                        data_dir=tmp_path, anthropic_api_key=None)
    client = StatekeeperClient(temporal_env.client, settings.task_queue)
    app = create_app(lambda: client)
    async with build_worker(temporal_env.client, settings):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
                                     base_url="http://statekeeper.test", timeout=60.0) as http:
            yield http


@pytest.mark.parametrize("conversation_id", ["closed-deal-1", "order-completed-7", "never-started"])
async def test_unknown_conversation_is_404_whatever_its_id(api, conversation_id):
    """starter/client/conversations.py _rpc_reason classifies by substring of the server's message, which
    contains the workflow id: an unknown id containing 'closed'/'completed' is reported as a
    finished conversation (409) instead of an unknown one (404)."""
    for method, path, body in (("POST", f"/conversations/{conversation_id}/messages", {"text": "hi"}),
                               ("GET", f"/conversations/{conversation_id}", None),
                               ("POST", f"/conversations/{conversation_id}/cancel", {})):
        response = await api.request(method, path, json=body)
        assert response.status_code == 404, f"{method} {path}: {response.status_code} {response.text}"


async def test_lone_surrogate_message_is_a_422_not_a_500(api):
    """JSON allows the escape \\ud800; the API's size check `body.text.encode("utf-8")`
    raises UnicodeEncodeError before the workflow sees the message -> 500 (plain text)."""
    created = await api.post("/conversations", json={})
    cid = created.json()["conversation_id"]
    response = await api.post(f"/conversations/{cid}/messages", content=b'{"text": "hi \\ud800"}',
                              headers={"content-type": "application/json"})
    assert response.status_code == 422, f"{response.status_code} {response.text!r}"
    assert isinstance(response.json().get("detail"), str)


async def test_malformed_body_refusal_has_a_string_detail(api):
    """docs/api.md: refusals carry {"detail": reason}. FastAPI's own body validation returns a
    list of error objects instead."""
    created = await api.post("/conversations", json={})
    cid = created.json()["conversation_id"]
    response = await api.post(f"/conversations/{cid}/messages", json={"text": 5})
    assert response.status_code == 422
    assert isinstance(response.json()["detail"], str), response.json()


async def test_empty_oversized_and_finished_messages_are_refused(api):
    cid = (await api.post("/conversations", json={})).json()["conversation_id"]
    r = await api.post(f"/conversations/{cid}/messages", json={"text": " \n\t "})
    assert r.status_code == 422 and "empty" in r.json()["detail"]
    r = await api.post(f"/conversations/{cid}/messages", json={"text": "\u00e9" * 4097})  # 8194 bytes
    assert r.status_code == 422 and "8192" in r.json()["detail"]
    r = await api.post(f"/conversations/{cid}/messages", json={"text": "x" * 70000})
    assert r.status_code == 422
    r = await api.post(f"/conversations/{cid}/cancel", json={"reason": "bye"})
    assert r.status_code == 202
    # after the cancel is processed the conversation is finished: 409 with a clear reason
    for _ in range(50):
        r = await api.post(f"/conversations/{cid}/messages", json={"text": "hello"})
        if r.status_code == 409:
            break
    assert r.status_code == 409 and "start a new conversation" in r.json()["detail"]
    r = await api.get(f"/conversations/{cid}")
    assert r.status_code == 200 and r.json()["status"] == "cancelled"


@pytest.mark.parametrize("rollback", ["yes", "true", 1, "1", "on", 0.0])
async def test_a_rollback_that_is_not_a_boolean_is_refused_and_nothing_is_cancelled(api, rollback):
    """starter/api/models.py CancelIn.rollback was a lax ``bool``: ``"yes"``, ``"on"`` or ``1``
    became ``true`` and the conversation's reversible writes were undone on a value the
    schema says is not one (adversarial review). Refused as a 422; the conversation goes on."""
    cid = (await api.post("/conversations", json={})).json()["conversation_id"]
    response = await api.post(f"/conversations/{cid}/cancel", json={"reason": "r", "rollback": rollback})
    assert response.status_code == 422, response.text
    assert "rollback" in response.json()["detail"]
    assert (await api.get(f"/conversations/{cid}")).json()["status"] == "active"
    assert (await api.post(f"/conversations/{cid}/cancel", json={"rollback": True})).status_code == 202
