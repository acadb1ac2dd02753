"""The ``propose_action`` activity against the offline model over real HTTP (uvicorn in
a thread) and through the in-process transport: the same SDK code path both ways; and its
records in the decision log: one ``model_calls`` row per (conversation, turn, call_seq) with
the view, prompt version, model, proposal, stop reason and token usage; a retried attempt
overwrites it; a malformed or failed call is recorded without a proposal; a journal that fails
never fails the call (real SQLite journal).

Its request/response mapping on an in-memory transport (no socket) is
tests/core/test_model_wire.py.
"""

from __future__ import annotations

import json
import logging
import socket
from datetime import timedelta, datetime, timezone
from typing import Any, Callable

import httpx
import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.llm.model_activity import ModelActivities, build_client, offline_client
from activities.llm.wire import PROPOSE_TOOL_NAME
from activities.store.journal import JournalStore
from systems.model.server import BrainFault, offline_brain, start_in_thread, StoppedEarly
from tests.journal_fixtures import sqlite_url
from tests.model_requests import MODEL, failure, request, email_state
from workflows.domain.actions import ReplyAction, ToolCallAction
from workflows.domain.contracts import ModelRequest, ModelResult
from workflows.domain.prompt import ModelSnapshot, PROMPT_VERSION, state_view
from workflows.domain.state import Customer


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


# --- The call's record in the decision log ---

REPLY = {"kind": "reply", "text": "Hello!"}


def view_request(call_seq: int = 1, customer: bool = True, **update) -> ModelRequest:
    state = email_state()
    if customer:
        state.customer = Customer(user_id="ab_1", authenticated_via="email", authenticated_turn=1,
                                  email="a.b@example.com")
    fields = {"conversation_id": state.conversation_id, "turn": state.turn, "call_seq": call_seq,
              "prompt_version": PROMPT_VERSION, "view": state_view(state), **update}
    return ModelRequest(**fields)


@pytest.fixture
def journal(tmp_path):
    store = JournalStore(sqlite_url(tmp_path))
    yield store
    store.close()


def activities(journal, brain) -> ModelActivities:
    return ModelActivities(offline_client(10.0, brain=brain), model=MODEL, max_tokens=512, journal=journal)


async def test_a_call_writes_its_row(journal):
    seen = []
    req = view_request()
    model = activities(journal, lambda v, p: seen.append(v) or REPLY)
    result = await ActivityEnvironment().run(model.propose_action, req)
    assert seen == [req.view]  # the model got the view, rendered by the activity
    [row] = journal.decisions()
    assert (row.conversation_id, row.turn, row.call_seq, row.customer_id) == ("conv-1", 1, 1, "ab_1")
    assert (row.prompt_version, row.model, row.stop_reason) == (PROMPT_VERSION, MODEL, "tool_use")
    assert row.view == req.view and row.proposal == REPLY
    assert (row.input_tokens, row.output_tokens) == (result.input_tokens, result.output_tokens) and row.input_tokens
    # the first call writes the shared prefix to the stand-in's prompt cache, a second one reads it
    assert row.cache_creation_input_tokens == result.cache_creation_input_tokens > 0
    second = await ActivityEnvironment().run(model.propose_action, req.model_copy(update={"call_seq": 2}))
    assert second.cache_read_input_tokens > 0
    assert journal.decisions()[1].cache_read_input_tokens == second.cache_read_input_tokens
    assert row.verdict is None  # the workflow's verdict comes with its turn record


async def test_a_malformed_attempt_is_recorded_and_its_retry_overwrites_it(journal):
    answers = [StoppedEarly("refusal", REPLY), REPLY]
    acts = activities(journal, lambda v, p: answers.pop(0))
    with pytest.raises(ApplicationError) as info:
        await acts.propose_action(view_request())
    assert info.value.type == "MalformedModelOutput"
    [row] = journal.decisions()
    assert row.proposal is None and row.stop_reason == "refusal" and row.model == MODEL
    await acts.propose_action(view_request())  # Temporal's retry: same conversation, turn and call_seq
    [row] = journal.decisions()
    assert row.proposal == REPLY and row.stop_reason == "tool_use"


async def test_a_failed_call_is_recorded_without_a_response(journal):
    def down(view, plan):
        raise BrainFault(529, "overloaded_error", "Overloaded")
    with pytest.raises(ApplicationError) as info:
        await activities(journal, down).propose_action(view_request(call_seq=2))
    assert info.value.type == "ModelUnavailable"
    [row] = journal.decisions()
    assert (row.call_seq, row.proposal, row.stop_reason, row.input_tokens) == (2, None, None, 0)


async def test_a_journal_failure_never_fails_the_model_call(journal, caplog):
    journal.engine.dispose()
    journal.record_model_call = _raise  # the journal's database is gone
    with caplog.at_level(logging.WARNING, logger="statekeeper.model"):
        result = await activities(journal, lambda v, p: REPLY).propose_action(view_request())
    assert result.action.kind == "reply"
    [message] = [r.getMessage() for r in caplog.records if r.name == "statekeeper.model"]
    assert "not recorded" in message and "OperationalError" in message
    assert "a.b@example.com" not in message and "Hello" not in message  # ids only, no personal data


def _raise(record, turn=None):
    import sqlalchemy.exc
    raise sqlalchemy.exc.OperationalError("INSERT ... a.b@example.com", {}, Exception("down"))


async def test_a_v010_snapshot_request_still_runs_and_is_not_recorded(journal):
    legacy = request()  # what v0.1.0 workflows sent: a rendered snapshot, no view, no call_seq
    assert legacy.view is None and legacy.call_seq == 0
    result = await activities(journal, lambda v, p: REPLY).propose_action(legacy)
    assert result.action.kind == "reply" and journal.decisions() == []


async def test_an_unknown_prompt_version_is_rejected_without_a_model_call(journal):
    calls = []
    with pytest.raises(ApplicationError) as info:
        await activities(journal, lambda v, p: calls.append(v) or REPLY).propose_action(
            view_request(prompt_version="1999-01-01"))
    assert info.value.type == "ModelRequestRejected" and info.value.non_retryable
    assert calls == [] and journal.decisions() == []


def test_a_request_needs_a_view_or_a_snapshot():
    with pytest.raises(ValueError):
        ModelRequest(conversation_id="c")
    decoded = ModelRequest.model_validate({"conversation_id": "c", "snapshot": {"system": "s", "content": "x"}})
    assert decoded.turn == 0 and decoded.view is None  # a v0.1.0 payload decodes


def turn_journal(request: ModelRequest) -> ModelRequest:
    """``request`` carrying its turn's journal record so far (the user's message)."""
    from workflows.domain.journal import EntryKind, Role, TranscriptRecord, TurnRecord

    said = TranscriptRecord(turn=request.turn, seq=0, role=Role.USER, kind=EntryKind.MESSAGE, text="hi",
                            at=datetime(2026, 11, 1, tzinfo=timezone.utc))
    record = TurnRecord(conversation_id=request.conversation_id, turn=request.turn, transcript=[said])
    return request.model_copy(update={"journal": record})


def journaling(journal, brain) -> ModelActivities:
    """The worker's wiring: one journal gets the call rows and the turn records."""
    model = activities(journal, brain)
    model.turn_records = journal
    return model


async def test_a_reply_writes_its_call_and_its_turn_together(journal):
    result = await journaling(journal, lambda v, p: REPLY).propose_action(turn_journal(view_request()))
    assert result.journaled
    assert [(r.call_seq, r.verdict) for r in journal.decisions()] == [(1, "replied")]
    assert [(e.role, e.text) for e in journal.transcript("conv-1")] == [("user", "hi"), ("assistant", "Hello!")]


async def test_when_the_turn_part_fails_the_call_row_is_written_alone_and_the_workflow_writes_the_turn(journal):
    def refused(conn, record):
        import sqlalchemy.exc
        raise sqlalchemy.exc.OperationalError("INSERT ... a.b@example.com", {}, Exception("down"))
    journal._record_turn = refused
    result = await journaling(journal, lambda v, p: REPLY).propose_action(turn_journal(view_request()))
    assert result.action.kind == "reply" and not result.journaled  # the workflow's own record_turn follows
    [row] = journal.decisions()
    assert (row.call_seq, row.proposal, row.verdict) == (1, REPLY, None)
    assert journal.transcript("conv-1") == []


async def test_a_tool_call_proposal_writes_no_turn_record(journal):
    call = {"kind": "tool_call", "tool": {"name": "get_order_details", "arguments": {"order_id": "#W0000001"}}}
    result = await journaling(journal, lambda v, p: call).propose_action(turn_journal(view_request()))
    assert not result.journaled and journal.transcript("conv-1") == []
    assert [r.proposal["kind"] for r in journal.decisions()] == ["tool_call"]
