"""Every API call has a deadline: with no worker polling the task queue the answer is a
503 naming that, and with Temporal down a 503 saying so — each within seconds, never a
hang — and nothing is started or changed by the refused call.

Real HTTP semantics (httpx ASGI transport), a real Temporal dev server (the session's, and
one this module starts and stops to play "Temporal went down").
"""

from __future__ import annotations

import re
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from starter.api.application import create_app
from starter.client.conversations import ConversationError, Deadlines, StatekeeperClient
from starter.runtime.connection import data_converter
from starter.dev.server import DEV_SERVER_STARTUP
from workflows.domain.contracts import SupportInput
from workflows.options import SEARCH_ATTRIBUTES
from workflows.conversation.workflow import SupportWorkflow

FAST = Deadlines(rpc_seconds=2.0, accept_seconds=2.0, reply_seconds=10.0)
BOUND = 8.0
"""Seconds within which every refusal here must arrive (the deadlines above plus slack)."""


def _http(client_factory) -> httpx.AsyncClient:
    app = create_app(client_factory)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
                             base_url="http://statekeeper.test", timeout=60.0)


async def _timed(call):
    started = time.monotonic()
    response = await call
    return response, time.monotonic() - started


async def _history_length(client: Client, workflow_id: str) -> int:
    return len((await client.get_workflow_handle(workflow_id).fetch_history()).events)


async def test_no_worker_polling_is_a_503_naming_it_and_starts_nothing(temporal_env):
    queue = f"nobody-{uuid.uuid4().hex[:8]}"
    client = StatekeeperClient(temporal_env.client, queue, deadlines=FAST)
    async with _http(lambda: client) as http:
        response, took = await _timed(http.get("/healthz"))
        assert response.status_code == 503 and took < BOUND
        assert response.json()["temporal"] == "reachable" and queue in response.json()["detail"]

        cid = f"idle-{uuid.uuid4().hex[:8]}"
        for path, body in (("/conversations", {"conversation_id": cid}),
                           ("/conversations", {"conversation_id": cid, "text": "hello"}),
                           # a request id of its own: the session's server may hold another test's r-1, which
                           # a repeat rightly answers from that run without any worker
                           ("/refunds", {"request_id": f"r-{cid}", "order_id": "#W4566809", "operation": "cancel",
                                         "reason": "no longer needed"})):
            response, took = await _timed(http.post(path, json=body))
            assert response.status_code == 503 and took < BOUND, (path, response.text, took)
            assert "no worker is polling" in response.json()["detail"]
        # nothing was started by the refused calls
        assert (await temporal_env.client.count_workflows(f'WorkflowId = "support-{cid}"')).count == 0
        assert (await temporal_env.client.count_workflows(f'TaskQueue = "{queue}"')).count == 0

        # a conversation that exists (started before its worker went away): message and state
        workflow_id = f"support-{cid}"
        await temporal_env.client.start_workflow(SupportWorkflow.run, SupportInput(conversation_id=cid),
                                                 id=workflow_id, task_queue=queue)
        before = await _history_length(temporal_env.client, workflow_id)
        for method, path, body in (("POST", f"/conversations/{cid}/messages", {"text": "hi", "message_id": "m1"}),
                                   ("GET", f"/conversations/{cid}", None),
                                   ("POST", f"/approvals/{workflow_id}~0123456789ab",
                                    {"decision": "approve", "approver": "sup-1"})):
            response, took = await _timed(http.request(method, path, json=body))
            assert response.status_code == 503 and took < BOUND, (path, response.text, took)
            assert "no worker is polling" in response.json()["detail"]
        assert await _history_length(temporal_env.client, workflow_id) == before  # nothing entered history
        await temporal_env.client.get_workflow_handle(workflow_id).terminate("test finished")


async def test_temporal_down_is_a_503_within_the_deadline(tmp_path: Path):
    env = await WorkflowEnvironment.start_local(
        dev_server_startup_timeout=DEV_SERVER_STARTUP,
        dev_server_existing_path=str(Path(sys.executable).parent / "temporal"), data_converter=data_converter(),
        search_attributes=list(SEARCH_ATTRIBUTES), dev_server_log_level="error")
    client = StatekeeperClient(env.client, f"down-{uuid.uuid4().hex[:8]}", deadlines=FAST)
    await env.shutdown()  # the client stays connected to a server that is gone
    async with _http(lambda: client) as http:
        for method, path, body in (("GET", "/healthz", None),
                                   ("POST", "/conversations", {"conversation_id": "c-1"}),
                                   ("POST", "/conversations/c-1/messages", {"text": "hi"}),
                                   ("GET", "/conversations/c-1", None),
                                   ("POST", "/conversations/c-1/cancel", {}),
                                   ("GET", "/conversations", None),
                                   ("POST", "/refunds", {"request_id": "r-1", "order_id": "#W4566809",
                                                         "operation": "cancel", "reason": "no longer needed"}),
                                   ("GET", "/refunds/refund-x", None),
                                   ("POST", "/approvals/support-c-1~0123456789ab",
                                    {"decision": "approve", "approver": "sup"})):
            response, took = await _timed(http.request(method, path, json=body))
            assert response.status_code == 503 and took < BOUND, (path, response.status_code, response.text, took)
            detail = response.json()["detail"]
            assert "not reachable" in detail and "RPCError" not in detail and "grpc" not in detail.lower()
        # (through the API a message is refused by the guard's lookup first: nothing was sent,
        # so "retry later" is the truth there)
    # the client sends at once: the message may have landed before the server went away, so the
    # caller learns the id to send it again with (generated when it gave none), not "retry later"
    with pytest.raises(ConversationError) as refused:
        await client.send_message("c-1", "yes")
    assert refused.value.kind == "outcome_unknown" and re.fullmatch("[0-9a-f]{32}", refused.value.message_id)
    assert f'send it again with message_id "{refused.value.message_id}"' in str(refused.value)
    with pytest.raises(ConversationError) as refused:
        await client.send_message("c-1", "yes", message_id="m-7")
    assert refused.value.kind == "outcome_unknown" and refused.value.message_id == "m-7"
    with pytest.raises(ConversationError) as refused:  # a decision's update id is the decision itself
        await client.decide_approval("support-c-1~0123456789ab", "approve", "sup")
    assert refused.value.kind == "outcome_unknown" and "send the same decision again (approve by sup)" in str(
        refused.value)
    with pytest.raises(ConversationError) as refused:
        await client.state("c-1")  # a read changes nothing: plainly unavailable
    assert refused.value.kind == "unavailable" and refused.value.message_id is None


async def test_unreachable_at_startup_is_a_503_fast():
    async def connect_nowhere() -> StatekeeperClient:
        return StatekeeperClient(await Client.connect("127.0.0.1:1", data_converter=data_converter()),
                                 deadlines=FAST)

    async with _http(connect_nowhere) as http:
        for path in ("/healthz", "/conversations/c-1"):
            response, took = await _timed(http.get(path))
            assert response.status_code == 503 and took < BOUND, (path, response.text, took)
            assert response.json()["detail"] == "Temporal is not reachable"


async def test_a_busy_worker_is_given_the_reply_deadline_and_the_start_is_sent_again(temporal_env, settings):
    # An acceptance deadline no worker can meet: every start and message takes the "busy worker"
    # path, which sends the same update (and a fresh start operation) again with the reply deadline.
    from tests.workflow_harness import running_worker

    async with running_worker(temporal_env, settings):
        client = StatekeeperClient(temporal_env.client, settings.task_queue,
                                   deadlines=Deadlines(accept_seconds=0.001, reply_seconds=30.0))
        await StatekeeperClient(temporal_env.client, settings.task_queue).require_worker()  # its first poll
        cid = f"busy-{uuid.uuid4().hex[:6]}"
        assert await client.start_conversation(cid) == cid
        reply = await client.send_message(cid, "Hello there", message_id="m-1")
        again = await client.send_message(cid, "Hello there", message_id="m-1")
        assert again == reply and (await client.state(cid)).turn == 1
