"""The ``propose_action`` activity's mapping to and from the Messages API, with the SDK on
an in-memory transport (no socket): the request it sends, the responses it refuses,
how HTTP statuses map to retryable or not, and the tool's input schema.

Parallel tool use: the request allows it, and several ``propose_action`` calls of tool calls
in one response are one batch (``ToolBatchAction``) in their order; several calls that hold a
reply, an end or a transfer are malformed (retried, then a rejection), never read as their first
call only: the rest would be silently dropped, the same loss as a cut-off input.

The same activity over real HTTP against the offline server is
tests/activities/test_model_activity.py.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import anthropic
import httpx
import httpx2
import pytest

from activities.llm.model_activity import ModelActivities, map_api_error, offline_client
from activities.llm.wire import PROPOSE_TOOL_NAME, build_create_kwargs, MalformedOutput, read_proposal
from systems.model.wire import error_body, tool_use_message
from tests.model_requests import MODEL, email_state, failure, request
from workflows.domain.actions import ReplyAction
from workflows.domain.prompt import render_snapshot, ModelSnapshot


async def test_offline_client_really_uses_the_given_app():
    seen: list[dict] = []

    def recording(view: dict, plan: dict | None = None) -> dict:
        seen.append(view)
        return {"kind": "reply", "text": "from the in-process app"}

    acts = ModelActivities(offline_client(10.0, brain=recording), model=MODEL)
    result = await acts.propose_action(request())
    assert isinstance(result.action, ReplyAction)
    assert result.action.text == "from the in-process app"
    assert len(seen) == 1


def test_sdk_refuses_httpx_clients():
    # anthropic 2.x is built on httpx2; an httpx transport would never be used.
    with pytest.raises(TypeError):
        anthropic.AsyncAnthropic(api_key="k", http_client=httpx.AsyncClient())


async def test_request_wire_format():
    captured: list[httpx2.Request] = []

    def handler(req: httpx2.Request) -> httpx2.Response:
        captured.append(req)
        body = tool_use_message(message_id="msg_1", tool_use_id="toolu_1", model="served-model",
                                action={"kind": "reply", "text": "hello"}, input_tokens=11, output_tokens=7)
        return httpx2.Response(200, json=body)

    client = anthropic.AsyncAnthropic(api_key="k", base_url="http://mock.invalid", max_retries=0,
                                      http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)))
    req = request()
    result = await ModelActivities(client, model=MODEL, max_tokens=321).propose_action(req)
    assert (result.model, result.input_tokens, result.output_tokens) == ("served-model", 11, 7)
    assert len(captured) == 1  # max_retries=0 and success: one request
    sent = json.loads(captured[0].content)
    assert captured[0].url.path == "/v1/messages"
    # anthropic 2.14 authenticates with "Authorization: Bearer"; older SDKs with x-api-key
    headers = captured[0].headers
    assert headers.get("x-api-key") == "k" or headers.get("authorization") == "Bearer k"
    assert headers.get("anthropic-version")
    assert sent["model"] == MODEL and sent["max_tokens"] == 321
    # the lean layout: a breakpoint on the system block (tools + system), on each stable block and
    # on the last block of the turns log; 4 in all, the API's most
    ephemeral = {"type": "ephemeral"}
    assert sent["system"] == [{"type": "text", "text": req.snapshot.system, "cache_control": ephemeral}]
    log = [{"type": "text", "text": block} for block in req.snapshot.log]
    log[-1]["cache_control"] = ephemeral
    assert sent["messages"] == [{"role": "user", "content": [
        *({"type": "text", "text": block, "cache_control": ephemeral} for block in req.snapshot.stable),
        *log, {"type": "text", "text": req.snapshot.content}]}]
    assert len(req.snapshot.stable) == 2 and len(req.snapshot.log) >= 2  # the facts, then one block a message
    assert sent["tool_choice"] == {"type": "tool", "name": PROPOSE_TOOL_NAME, "disable_parallel_tool_use": False}
    assert sent["metadata"] == {"user_id": req.conversation_id}  # the conversation, as an opaque id
    (tool,) = sent["tools"]
    assert tool["name"] == PROPOSE_TOOL_NAME
    assert tool["input_schema"]["type"] == "object"
    assert not {"oneOf", "anyOf", "allOf"} & set(tool["input_schema"])


def mock_client(body: dict, status: int = 200) -> anthropic.AsyncAnthropic:
    transport = httpx2.MockTransport(lambda req: httpx2.Response(status, json=body))
    return anthropic.AsyncAnthropic(api_key="k", base_url="http://mock.invalid", max_retries=0,
                                    http_client=httpx2.AsyncClient(transport=transport))


async def test_text_only_response_is_malformed():
    body = tool_use_message(message_id="m", tool_use_id="t", model=MODEL, action={}, input_tokens=1, output_tokens=1)
    body["content"] = [{"type": "text", "text": "I think you should cancel."}]
    body["stop_reason"] = "end_turn"
    err = await failure(ModelActivities(mock_client(body), model=MODEL), request())
    assert err.type == "MalformedModelOutput" and not err.non_retryable
    assert "no tool_use" in err.message


@pytest.mark.parametrize("stop_reason", ["max_tokens", "refusal", "pause_turn", "end_turn", None])
async def test_a_tool_call_that_did_not_complete_is_never_acted_on(stop_reason):
    # a valid-looking input cut off by max_tokens may hold 1 of the 4 items the user named
    action = {"kind": "tool_call", "tool": {"name": "return_delivered_order_items", "arguments": {
        "order_id": "#W7736708", "item_ids": ["1234567890"], "payment_method_id": "credit_card_3362387"}}}
    body = tool_use_message(message_id="m", tool_use_id="t", model=MODEL, action=action,
                            input_tokens=1, output_tokens=1, stop_reason=stop_reason)
    err = await failure(ModelActivities(mock_client(body), model=MODEL), request())
    assert err.type == "MalformedModelOutput" and not err.non_retryable  # retried, then a rejection
    assert f"stop_reason={stop_reason!r}" in err.message and "before completing its tool call" in err.message


async def test_tool_use_of_another_tool_is_malformed():
    body = tool_use_message(message_id="m", tool_use_id="t", model=MODEL, action={"kind": "end"},
                            input_tokens=1, output_tokens=1)
    body["content"][0]["name"] = "some_other_tool"
    err = await failure(ModelActivities(mock_client(body), model=MODEL), request())
    assert err.type == "MalformedModelOutput"
    assert "some_other_tool" in err.message


async def test_missing_credentials_are_rejected(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    body = tool_use_message(message_id="m", tool_use_id="t", model=MODEL, action={"kind": "end"},
                            input_tokens=1, output_tokens=1)
    transport = httpx2.MockTransport(lambda req: httpx2.Response(200, json=body))
    client = anthropic.AsyncAnthropic(api_key=None, base_url="http://mock.invalid", max_retries=0,
                                      http_client=httpx2.AsyncClient(transport=transport))
    err = await failure(ModelActivities(client, model=MODEL), request())
    assert err.type == "ModelRequestRejected" and err.non_retryable


@pytest.mark.parametrize(("status", "retryable"), [(400, False), (402, False), (408, True), (409, True),
                                                   (413, False), (429, True), (500, True), (529, True)])
def test_status_mapping(status: int, retryable: bool):
    response = httpx2.Response(status, json=error_body("x", "m"),
                               request=httpx2.Request("POST", "http://mock.invalid/v1/messages"))
    exc = anthropic.APIStatusError("m", response=response, body=None)
    err = map_api_error(exc)
    assert err.non_retryable is (not retryable)
    assert err.type == ("ModelUnavailable" if retryable else "ModelRequestRejected")


def test_input_schema_is_an_object_covering_every_variant():
    from activities.llm.wire import propose_input_schema
    from workflows.domain.actions import proposed_action_json_schema
    from workflows.domain.catalogue import CATALOGUE
    from workflows.domain.prompt import LAST_CACHED_VERSION, PROMPT_VERSION, PROMPT_VERSIONS

    offered = [name for name in CATALOGUE if name not in PROMPT_VERSIONS[PROMPT_VERSION].withheld_tools]
    schema = propose_input_schema()
    assert schema["type"] == "object" and schema["required"] == ["kind"]
    assert not {"oneOf", "anyOf", "allOf"} & set(schema)
    union = proposed_action_json_schema()
    variants = [union["$defs"][ref["$ref"].rsplit("/", 1)[-1]] for ref in union["oneOf"]]
    assert schema["properties"]["kind"]["enum"] == [v["properties"]["kind"]["const"] for v in variants]
    assert set(schema["properties"]) == {name for v in variants for name in v["properties"]}
    assert not _refs(schema)  # the lean schema is self-contained
    tool = schema["properties"]["tool"]
    assert tool["required"] == ["name", "arguments"] and tool["properties"]["name"]["enum"] == offered
    for spec in map(CATALOGUE.__getitem__, offered):  # each tool a line: its name, every argument of its model, its description
        line = next(x for x in tool["description"].splitlines() if x.startswith(f"{spec.name}("))
        assert all(arg in line for arg in spec.args.model_fields) and line.endswith(spec.description)
    cached = propose_input_schema(LAST_CACHED_VERSION)
    refs = {ref.rsplit("/", 1)[-1] for ref in _refs(cached)}
    assert refs and refs <= set(cached["$defs"])  # every $ref of the cached layout's schema resolves


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return ([node["$ref"]] if "$ref" in node else []) + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


async def test_a_conversation_id_longer_than_the_api_takes_is_sent_hashed():
    # the Python client takes conversation ids up to 992 bytes; metadata.user_id over 256
    # characters is a 400 from the Messages API (and the stand-in): sent whole, every model call would fail
    long_id = "conversation-" + "l" * 900
    acts = ModelActivities(offline_client(10.0), model=MODEL)
    result = await acts.propose_action(request(email_state().model_copy(update={"conversation_id": long_id})))
    assert result.action is not None
    sent = build_create_kwargs(render_snapshot(email_state()), model=MODEL, max_tokens=10, conversation_id=long_id)
    user_id = sent["metadata"]["user_id"]
    assert user_id.startswith("sha256:") and len(user_id) <= 256 and "l" * 10 not in user_id
    short = build_create_kwargs(render_snapshot(email_state()), model=MODEL, max_tokens=10, conversation_id="tb-1-3")
    assert short["metadata"]["user_id"] == "tb-1-3"  # benchmark plans are found by the id as it is


# --- Parallel tool use ---

def _block(order_id: str) -> SimpleNamespace:
    return SimpleNamespace(type="tool_use", name="propose_action", input={
        "kind": "tool_call", "tool": {"name": "get_order_details", "arguments": {"order_id": order_id}}})


def test_several_tool_calls_in_one_response_are_one_batch_in_their_order():
    message = SimpleNamespace(stop_reason="tool_use", content=[_block("#W1"), _block("#W2")], model="m")
    request = build_create_kwargs(ModelSnapshot(system="s", content="c"), model="m", max_tokens=100,
                                  conversation_id="c")
    assert request["tool_choice"]["disable_parallel_tool_use"] is False
    batch = read_proposal(message)
    assert batch.kind == "tool_calls"
    assert [call.arguments.order_id for call in batch.tools] == ["#W1", "#W2"]


def test_a_reply_beside_a_tool_call_is_not_half_acted_on():
    reply = SimpleNamespace(type="tool_use", name="propose_action", input={"kind": "reply", "text": "done"})
    message = SimpleNamespace(stop_reason="tool_use", content=[_block("#W1"), reply], model="m")
    with pytest.raises(MalformedOutput, match="2 proposals; only tool calls"):
        read_proposal(message)


def test_more_tool_calls_than_a_batch_may_hold_are_malformed():
    message = SimpleNamespace(stop_reason="tool_use", content=[_block(f"#W{n}") for n in range(65)], model="m")
    with pytest.raises(MalformedOutput, match="65 tool calls; at most 64"):
        read_proposal(message)