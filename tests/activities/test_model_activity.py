"""The ``propose_action`` activity against the offline model over real HTTP (uvicorn in
a thread) and through the in-process transport: the same SDK code path both ways.

Its request/response mapping on an in-memory transport (no socket) is
tests/core/test_model_wire.py.
"""

from __future__ import annotations

import json
import socket
from datetime import timedelta
from typing import Any, Callable

import httpx
import pytest
from temporalio.testing import ActivityEnvironment

from activities.llm.model_activity import ModelActivities, build_client, offline_client
from activities.llm.wire import PROPOSE_TOOL_NAME
from systems.model.server import BrainFault, offline_brain, start_in_thread
from tests.model_requests import MODEL, failure, request
from workflows.domain.actions import ReplyAction, ToolCallAction
from workflows.domain.contracts import ModelRequest, ModelResult
from workflows.domain.prompt import ModelSnapshot


class SwitchableBrain:
    """The server's brain, swappable per test; records the views and plans it was asked about."""

    def __init__(self) -> None:
        self.fn: Callable[[dict, dict | None], dict] = offline_brain
        self.views: list[dict] = []
        self.plans: list[dict | None] = []

    def __call__(self, view: dict, plan: dict | None = None) -> dict:
        self.views.append(view)
        self.plans.append(plan)
        return self.fn(view, plan)


@pytest.fixture(scope="module")
def brain():
    return SwitchableBrain()


PLANS: dict[str, dict] = {}
"""The plan book of the module's server: anything with ``get(conversation_id)`` will do."""


@pytest.fixture(scope="module")
def server(brain):
    running = start_in_thread(brain, plans=PLANS)
    yield running
    running.stop()


@pytest.fixture(autouse=True)
def reset_brain(brain):
    brain.fn = offline_brain
    brain.views.clear()
    brain.plans.clear()
    PLANS.clear()


def http_activities(server) -> ModelActivities:
    return ModelActivities(build_client("test-key", server.base_url, 10.0), model=MODEL, max_tokens=512)


async def test_http_round_trip_returns_valid_action_with_usage(server, brain):
    result = await http_activities(server).propose_action(request())
    assert isinstance(result, ModelResult)
    assert isinstance(result.action, ToolCallAction)
    assert result.action.tool.name == "find_user_id_by_email"
    assert result.action.tool.arguments.email == "a.b@example.com"
    assert result.model == MODEL
    # the system prompt alone is several thousand characters; input_tokens is the uncached rest
    prompt = result.input_tokens + result.cache_read_input_tokens + result.cache_creation_input_tokens
    assert prompt > 1000 and result.input_tokens < prompt
    assert result.output_tokens > 0
    assert brain.views and brain.views[-1]["conversation_id"] == "conv-1"
    assert brain.plans == [None]  # no plan registered for conv-1: the rules brain answered


async def test_the_server_finds_the_plan_by_metadata_user_id(server, brain):
    plan = {"user": {"email": "a.b@example.com"},
            "actions": [{"name": "find_user_id_by_name_zip",
                         "kwargs": {"first_name": "A", "last_name": "B", "zip": "12345"}}]}
    PLANS["conv-1"] = plan
    result = await http_activities(server).propose_action(request())
    assert brain.plans == [plan]
    # the scripted brain follows the plan's own lookup first; the rules brain would use the email
    assert result.action.tool.name == "find_user_id_by_name_zip"
    PLANS["someone-else"] = PLANS.pop("conv-1")
    result = await http_activities(server).propose_action(request())
    assert brain.plans[-1] is None and result.action.tool.name == "find_user_id_by_email"


async def test_runs_inside_activity_environment(server):
    result = await ActivityEnvironment().run(http_activities(server).propose_action, request())
    assert isinstance(result.action, ToolCallAction)


async def test_offline_transport_matches_http_server(server):
    req = request()
    over_http = await http_activities(server).propose_action(req)
    in_process = await ModelActivities(offline_client(10.0), model=MODEL, max_tokens=512).propose_action(req)
    # each stand-in has its own prompt cache (the server's may already hold this prefix): the
    # prompt is the same size, split differently between cached and uncached
    cache = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    assert in_process.model_dump(exclude=set(cache)) == over_http.model_dump(exclude=set(cache))
    assert sum(getattr(in_process, k) for k in cache) == sum(getattr(over_http, k) for k in cache)


@pytest.mark.parametrize(
    "raw",
    [
        {"kind": "tool_call", "tool": {"name": "delete_all_orders", "arguments": {}}},
        {"kind": "tool_call", "tool": {"name": "cancel_pending_order", "arguments": {"order_id": "#W1", "amount": 5}}},
        {"kind": "reply"},
        {"foo": "bar"},
    ],
)
async def test_malformed_brain_output_is_retryable_malformed(server, brain, raw):
    brain.fn = lambda view, plan: raw
    err = await failure(http_activities(server), request())
    assert err.type == "MalformedModelOutput"
    assert not err.non_retryable
    assert "ProposedAction" in err.message


async def test_unknown_tool_summary_names_the_problem(server, brain):
    brain.fn = lambda view, plan: {"kind": "tool_call", "tool": {"name": "delete_all_orders", "arguments": {}}}
    err = await failure(http_activities(server), request())
    assert "delete_all_orders" in err.message


async def test_http_400_is_rejected_non_retryable(server):
    # No <state_json> block: the offline model answers 400 invalid_request_error.
    bad = ModelRequest(conversation_id="c", snapshot=ModelSnapshot(system="s", content="hello"))
    err = await failure(http_activities(server), bad)
    assert err.type == "ModelRequestRejected"
    assert err.non_retryable
    assert err.details[0]["status_code"] == 400


@pytest.mark.parametrize(
    ("status", "error_type"),
    [(529, "overloaded_error"), (500, "api_error"), (503, "api_error"), (429, "rate_limit_error")],
)
async def test_server_errors_are_retryable_unavailable(server, brain, status, error_type):
    def fault(view: dict, plan: dict | None = None) -> dict:
        raise BrainFault(status, error_type, "try again later")

    brain.fn = fault
    err = await failure(http_activities(server), request())
    assert err.type == "ModelUnavailable"
    assert not err.non_retryable
    assert err.details[0]["status_code"] == status


@pytest.mark.parametrize(("status", "error_type"), [(401, "authentication_error"), (403, "permission_error"),
                                                    (404, "not_found_error"), (422, "invalid_request_error")])
async def test_client_errors_are_rejected_non_retryable(server, brain, status, error_type):
    def fault(view: dict, plan: dict | None = None) -> dict:
        raise BrainFault(status, error_type, "no")

    brain.fn = fault
    err = await failure(http_activities(server), request())
    assert err.type == "ModelRequestRejected" and err.non_retryable


async def test_retry_after_becomes_next_retry_delay(server, brain):
    def fault(view: dict, plan: dict | None = None) -> dict:
        raise BrainFault(429, "rate_limit_error", "slow down", headers={"retry-after": "7"})

    brain.fn = fault
    err = await failure(http_activities(server), request())
    assert err.type == "ModelUnavailable"
    assert err.next_retry_delay == timedelta(seconds=7)


async def test_brain_crash_is_a_retryable_server_error(server, brain):
    def crash(view: dict, plan: dict | None = None) -> dict:
        raise RuntimeError("bug")

    brain.fn = crash
    err = await failure(http_activities(server), request())
    assert err.type == "ModelUnavailable" and not err.non_retryable


async def test_connection_refused_is_retryable_unavailable():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    acts = ModelActivities(build_client("k", f"http://127.0.0.1:{port}", 5.0), model=MODEL)
    err = await failure(acts, request())
    assert err.type == "ModelUnavailable" and not err.non_retryable


def raw_post(server, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    base = {"x-api-key": "k", "anthropic-version": "2023-06-01", "content-type": "application/json"}
    return httpx.post(f"{server.base_url}/v1/messages", content=json.dumps(body), headers={**base, **(headers or {})},
                      timeout=10.0)


@pytest.mark.parametrize("missing", ["model", "max_tokens", "messages"])
def test_server_requires_fields(server, missing):
    body = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": request().snapshot.content}]}
    del body[missing]
    response = raw_post(server, body)
    assert response.status_code == 400
    payload = response.json()
    assert payload["type"] == "error"
    assert payload["error"]["type"] == "invalid_request_error"
    assert missing in payload["error"]["message"]


def test_server_refuses_top_level_one_of_like_the_real_api(server):
    body = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": request().snapshot.content}],
            "tools": [{"name": "t", "input_schema": {"type": "object", "oneOf": [{"type": "object"}]}}]}
    response = raw_post(server, body)
    assert response.status_code == 400
    assert "top level" in response.json()["error"]["message"]


@pytest.mark.parametrize(("metadata", "problem"), [
    ("conv-1", "metadata: must be an object"),
    ({"user_id": "x" * 257}, "metadata.user_id"),
    ({"user_id": 7}, "metadata.user_id"),
    ({"user_id": "conv-1", "session": "s"}, "metadata.session"),
])
def test_server_checks_metadata_like_the_real_api(server, metadata, problem):
    body = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": request().snapshot.content}],
            "metadata": metadata}
    response = raw_post(server, body)
    assert response.status_code == 400
    assert problem in response.json()["error"]["message"]


def test_server_answers_with_the_forced_tool(server):
    tool = {"name": "next_step", "input_schema": {"type": "object"}}
    body = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": request().snapshot.content}],
            "tools": [tool], "tool_choice": {"type": "tool", "name": "next_step"}}
    (block,) = raw_post(server, body).json()["content"]
    assert block["name"] == "next_step"


def test_server_requires_an_api_key(server):
    body = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": request().snapshot.content}]}
    response = httpx.post(f"{server.base_url}/v1/messages", json=body, timeout=10.0)
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


def test_server_reply_shape_is_deterministic(server):
    body = {"model": MODEL, "max_tokens": 1024,
            "messages": [{"role": "user", "content": [{"type": "text", "text": request().snapshot.text()}]}]}
    first, second = raw_post(server, body).json(), raw_post(server, body).json()
    assert first == second
    assert first["type"] == "message" and first["role"] == "assistant" and first["model"] == MODEL
    assert first["id"].startswith("msg_") and first["stop_reason"] == "tool_use" and first["stop_sequence"] is None
    (block,) = first["content"]
    assert block["type"] == "tool_use" and block["id"].startswith("toolu_") and block["name"] == PROPOSE_TOOL_NAME
    assert block["input"]["kind"] == "tool_call"
    assert first["usage"]["input_tokens"] > 0 and first["usage"]["output_tokens"] > 0


def test_server_stops_at_the_requests_max_tokens_as_the_provider_does(server):
    body = {"model": MODEL, "max_tokens": 4,
            "messages": [{"role": "user", "content": [{"type": "text", "text": request().snapshot.content}]}]}
    reply = raw_post(server, body).json()
    assert reply["stop_reason"] == "max_tokens" and reply["usage"]["output_tokens"] == 4


async def test_null_fields_of_other_kinds_are_tolerated(server, brain):
    brain.fn = lambda view, plan: {"kind": "reply", "text": "hello", "tool": None, "summary": None}
    result = await http_activities(server).propose_action(request())
    assert result.action == ReplyAction(text="hello")
