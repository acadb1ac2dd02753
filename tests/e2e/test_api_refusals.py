"""Refusals and hostile input at the HTTP API, against a real Temporal dev server, a real worker
and SQLite:

- on the real app over HTTP semantics (httpx ASGI transport): an unknown conversation is a 404
  whatever its id; malformed or unencodable bodies are a 422 with a string reason; empty,
  oversized and finished-conversation messages are refused; a rollback that is not a JSON
  boolean is refused and nothing is cancelled;
- over real HTTP (uvicorn on loopback): every malformed body (invalid UTF-8, deeply nested
  JSON, control characters) is a 422 in the one documented shape ``{"detail": "<reason>"}``,
  every oversized body (20 MB) a 413 however it is framed, and none of them changes anything;
  crafted messages (the nested ``<script>`` message, an id in full-width digits, NUL) are
  answered or refused with a clear reason; random JSON and text on every route only ever get
  a status that route documents (hypothesis, a fixed seed and few examples).

docs/api.md: refusals are 422 (empty, over 8 KB), 409 (finished), 404 (unknown), 503 (Temporal
down), each with ``{"detail": reason}``.
"""

from __future__ import annotations

import json
import uuid
from typing import AsyncIterator, Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from settings import Settings
from starter.api.application import create_app
from starter.api.responses import statuses_for
from starter.client.conversations import StatekeeperClient
from tests.live_api import blocking, live_api
from tests.policy_fixtures import EMAIL, PENDING
from tests.workflow_harness import running_worker


# --- Refusals on the app ---

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
    """The server's message contains the workflow id: an unknown id containing 'closed' or
    'completed' is still an unknown conversation (404), never a finished one (409)."""
    for method, path, body in (("POST", f"/conversations/{conversation_id}/messages", {"text": "hi"}),
                               ("GET", f"/conversations/{conversation_id}", None),
                               ("POST", f"/conversations/{conversation_id}/cancel", {})):
        response = await api.request(method, path, json=body)
        assert response.status_code == 404, f"{method} {path}: {response.status_code} {response.text}"


async def test_lone_surrogate_message_is_a_422_not_a_500(api):
    """JSON allows the escape \\ud800, which UTF-8 cannot encode: the API's size check refuses it
    as a 422 with a reason, never a 500 in plain text from a UnicodeEncodeError."""
    created = await api.post("/conversations", json={})
    cid = created.json()["conversation_id"]
    response = await api.post(f"/conversations/{cid}/messages", content=b'{"text": "hi \\ud800"}',
                              headers={"content-type": "application/json"})
    assert response.status_code == 422, f"{response.status_code} {response.text!r}"
    assert isinstance(response.json().get("detail"), str)


async def test_malformed_body_refusal_has_a_string_detail(api):
    """docs/api.md: refusals carry {"detail": reason}, a string, not the list of error objects
    FastAPI's own body validation returns."""
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
    """``CancelIn.rollback`` is a strict boolean: ``"yes"``, ``"on"`` or ``1`` taken as ``true``
    would undo the conversation's reversible writes on a value the schema says is not one.
    Refused as a 422; the conversation goes on."""
    cid = (await api.post("/conversations", json={})).json()["conversation_id"]
    response = await api.post(f"/conversations/{cid}/cancel", json={"reason": "r", "rollback": rollback})
    assert response.status_code == 422, response.text
    assert "rollback" in response.json()["detail"]
    assert (await api.get(f"/conversations/{cid}")).json()["status"] == "active"
    assert (await api.post(f"/conversations/{cid}/cancel", json={"rollback": True})).status_code == 202


# --- Hostile input over real HTTP ---

NESTED_SCRIPT = "<script>" + "[" * 1200 + "]" * 1200 + "</script>"
TWENTY_MB = 20 * 1024 * 1024
SUCCESS = {200, 201, 202}


@pytest.fixture
async def live(temporal_env, settings) -> AsyncIterator[tuple[str, str]]:
    """(base URL of the API, id of a conversation with one message) over a test worker."""
    async with running_worker(temporal_env, settings):
        client = StatekeeperClient(temporal_env.client, settings.task_queue, pseudonym_key="test-key")
        async with live_api(client, settings) as base:
            async with httpx.AsyncClient(base_url=base, timeout=60) as http:
                cid = f"hostile-{uuid.uuid4().hex[:8]}"
                created = await http.post("/conversations", json={"conversation_id": cid,
                                                                  "text": f"Hi, my email is {EMAIL}"})
                assert created.status_code == 201, created.text
            yield base, cid


def _routes(cid: str) -> list[tuple[str, str]]:
    """(method, URL path) of every route, with real ids where the route takes one."""
    return [("POST", "/conversations"), ("GET", "/conversations"), ("GET", f"/conversations/{cid}"),
            ("POST", f"/conversations/{cid}/messages"), ("POST", f"/conversations/{cid}/cancel"),
            ("GET", f"/conversations/{cid}/transcript"), ("POST", "/refunds"), ("GET", "/refunds"),
            ("GET", "/refunds/refund-main-W4566809-r-1.r0123456789"), ("POST", "/approvals/x~0123456789ab"),
            ("GET", "/approvals"), ("GET", "/healthz")]


def _template(path: str, cid: str) -> str:
    """The route's path as declared (``starter.api.responses.ROUTES``)."""
    return (path.replace(cid, "{conversation_id}").replace("refund-main-W4566809-r-1.r0123456789", "{refund_id}")
            .replace("x~0123456789ab", "{approval_id}"))


def _refusal(response: httpx.Response) -> str:
    body = response.json()
    assert set(body) == {"detail"} and isinstance(body["detail"], str), response.text
    return body["detail"]


async def _unchanged(base: str, cid: str, before: dict) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        assert (await http.get(f"/conversations/{cid}")).json() == before


MALFORMED = {
    "invalid UTF-8": (b'{"text": "caf\xe9 \xff"}', "not valid UTF-8"),
    "deep JSON": (b'{"text": ' + b"[" * 5000 + b"]" * 5000 + b"}", "deeper than 32"),
    "raw NUL": (b'{"text": "hello\x00there"}', "raw control character (U+0000"),
    "UTF-16 JSON": ('{"text": "hello"}'.encode("utf-16-le"), "raw control character"),
    "not JSON": (b'{"text": hello}', "invalid request: the body is not valid JSON (at character 9)"),
}


async def test_malformed_bodies_are_a_422_in_the_documented_shape_and_change_nothing(live):
    """docs/security.md promises 422 {"detail"} for invalid UTF-8 and deeply nested JSON, not
    FastAPI's 400 (another shape). Every malformed body on every route is that 422."""
    base, cid = live
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        before = (await http.get(f"/conversations/{cid}")).json()
        fresh = f"never-{uuid.uuid4().hex[:6]}"
        for name, (body, reason) in MALFORMED.items():
            for method, path in _routes(cid):
                if method == "GET" and name == "not JSON":
                    continue  # a GET reads no body: only what cannot be read safely is refused
                response = await http.request(method, path, content=body, headers={"content-type": "application/json"})
                assert response.status_code == 422, (name, method, path, response.status_code, response.text)
                assert reason in _refusal(response), (name, path)
        escaped = {f"/conversations/{cid}/messages": {"text": "hello\u0000there"},
                   f"/conversations/{cid}/cancel": {"reason": "bye\u001b[2J"},
                   "/conversations": {"conversation_id": fresh, "text": "hi\u0085"},
                   "/approvals/x~0123456789ab": {"decision": "approve", "approver": "a", "note": "\u0007"}}
        for path, payload in escaped.items():
            response = await http.post(path, json=payload)
            assert response.status_code == 422 and "control character (U+" in _refusal(response), response.text
        response = await http.get(f"/conversations/{fresh}")
        assert response.status_code == 404  # nothing was started
    await _unchanged(base, cid, before)


async def test_twenty_megabytes_are_a_413_on_every_route_however_framed(live):
    """A 20 MB body, declared (Content-Length) or streamed (chunked): every route refuses it
    before reading more than the limit, and nothing changes."""
    base, cid = live
    big = b'{"text": "' + b"x" * TWENTY_MB + b'"}'

    def chunks():
        for start in range(0, len(big), 1 << 16):
            yield big[start:start + (1 << 16)]

    def send() -> list[tuple[str, str, int, str]]:
        answers = []
        with httpx.Client(base_url=base, timeout=30) as http:
            for method, path in _routes(cid):
                for framing, content in (("content-length", big), ("chunked", chunks())):
                    response = http.request(method, path, content=content, headers={"content-type": "application/json"})
                    answers.append((framing, path, response.status_code, response.json().get("detail", "")))
        return answers

    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        before = (await http.get(f"/conversations/{cid}")).json()
    for framing, path, status, detail in await blocking(send, timeout=120):
        assert status == 413 and "over the limit" in detail, (framing, path, status, detail)
    await _unchanged(base, cid, before)


async def test_crafted_messages_over_http(live):
    """The nested <script> message is an ordinary turn; an id in full-width digits is not
    pinned; NUL is refused naming it. The conversation answers throughout."""
    base, cid = live
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        url = f"/conversations/{cid}/messages"
        nested = await http.post(url, json={"text": NESTED_SCRIPT})
        assert nested.status_code == 200 and nested.json()["status"] == "active", nested.text
        wide = await http.post(url, json={"text": "status of #W４５６６８０９?"})
        assert wide.status_code == 200 and "４" not in wide.json()["text"], wide.text
        state = (await http.get(f"/conversations/{cid}")).json()
        assert [f["kind"] for f in state["pinned_facts"]] == ["email"] and state["turn"] == 3
        nul = await http.post(url, json={"text": "status of \u0000" + PENDING})
        assert nul.status_code == 422 and "U+0000 at position 10" in _refusal(nul)
        assert (await http.get(f"/conversations/{cid}")).json() == state
        ok = await http.post(url, json={"text": f"status of {PENDING}?"})
        assert ok.status_code == 200 and PENDING in ok.json()["text"]


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=30)
BODIES = st.one_of(JSON.map(lambda v: json.dumps(v).encode()), st.binary(max_size=64),
                   st.fixed_dictionaries({"text": st.text(max_size=40)}).map(lambda v: json.dumps(v).encode()))


async def test_random_json_and_text_on_every_route_get_a_documented_answer(live):
    """Property: whatever body, path id or query a caller sends (random JSON, bytes, text),
    each route answers a status its OpenAPI entry declares (or its success), never a 5xx,
    and every refusal is {"detail": str}."""
    base, cid = live

    def run() -> None:
        with httpx.Client(base_url=base, timeout=60) as http:
            for method, path in _routes(cid):
                allowed = SUCCESS | set(statuses_for(method, _template(path.split("?")[0], cid)))

                @settings(max_examples=12, derandomize=True, database=None, deadline=None,
                          suppress_health_check=list(HealthCheck))
                @given(body=BODIES, query=st.dictionaries(st.sampled_from(["customer_id", "order_id", "status", "limit",
                                                                           "next_page_token", "format", "x"]),
                                                          st.text(max_size=10), max_size=3))
                def check(body: bytes, query: dict[str, Any]) -> None:
                    response = http.request(method, path, content=body, params=query,
                                            headers={"content-type": "application/json"})
                    assert response.status_code in allowed, (method, path, body, query, response.text)
                    if response.status_code not in SUCCESS:
                        _refusal(response)

                check()
            for raw_id in ("\u0000", "a\u007fb", "x" * 300, "\u00e9t\u00e9", "../", "#W４５６６８０９"):
                response = http.get(f"/conversations/{quote(raw_id, safe='')}")
                assert response.status_code in (404, 422), (raw_id, response.text)
                _refusal(response)

    await blocking(run, timeout=120)


@pytest.mark.parametrize("path", ["/approvals/{id}", "/refunds/{id}"])
async def test_a_404_quotes_an_id_with_its_invisible_characters_escaped(api, path):
    """A reason never carries the caller's zero-width characters as they are (bidi controls are
    refused as invalid before): they are shown escaped, so the id reads as it was sent."""
    hostile = "appr\u200b-1\u2060x\ufeff"
    response = await api.get(path.format(id=quote(hostile)))
    assert response.status_code == 404, response.text
    detail = response.json()["detail"]
    assert not any(c in detail for c in "\u200b\u2060\ufeff"), detail
    assert "appr\\u200b-1\\u2060x\\ufeff" in detail, detail
