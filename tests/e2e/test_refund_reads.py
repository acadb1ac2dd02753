"""``GET /refunds/{refund_id}`` names refunds only: another process's workflow id (a
conversation's ``support-<id>``), running or finished, is a 404 like an unknown refund id.
Never a 500 ``Internal Server Error`` for a finished conversation's id (its outcome decoded
as a refund's, pydantic's text in the log), nor a refund ``running`` with the conversation's
order ids for a running one.
"""

from __future__ import annotations

import asyncio
import uuid

import httpx

from starter.api.application import create_app
from starter.client.conversations import StatekeeperClient
from starter.client.errors import ConversationError
from tests.policy_fixtures import EMAIL


async def _finished(client: StatekeeperClient, cid: str) -> None:
    for _ in range(100):
        if (await client.state(cid)).status.value != "active":
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"conversation {cid} did not finish")


async def test_a_conversations_workflow_id_is_not_a_refund(temporal_env, settings):
    from starter.runtime.worker import build_backend, build_worker

    client = StatekeeperClient(temporal_env.client, settings.task_queue, pseudonym_key="k")
    async with build_worker(temporal_env.client, settings, build_backend(settings)):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(lambda: client),
                                                                   raise_app_exceptions=False),
                                     base_url="http://statekeeper.test", timeout=60.0) as http:
            cid = f"not-refund-{uuid.uuid4().hex[:8]}"
            started = await http.post("/conversations", json={"conversation_id": cid,
                                                              "text": f"Hi, my email is {EMAIL}"})
            assert started.status_code == 201, started.text

            running = await http.get(f"/refunds/support-{cid}")
            assert running.status_code == 404, running.text
            assert running.json() == {"detail": f"refund support-{cid} does not exist"}

            await client.cancel(cid, "customer hung up")
            await _finished(client, cid)
            finished = await http.get(f"/refunds/support-{cid}")
            assert finished.status_code == 404, finished.text
            assert finished.json() == {"detail": f"refund support-{cid} does not exist"}
            try:
                await client.refund(f"support-{cid}")
            except ConversationError as err:
                assert err.kind == "not_found"
            else:
                raise AssertionError("a conversation was read as a refund")


async def test_an_approval_or_refund_id_longer_than_temporal_holds_is_a_404(temporal_env, settings):
    # such an id names no process (Temporal holds workflow ids of at most 1000 bytes): asked
    # anyway, Temporal's INVALID_ARGUMENT must not be a 503 "Temporal is not reachable; retry later"
    client = StatekeeperClient(temporal_env.client, settings.task_queue, pseudonym_key="k")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(lambda: client)),
                                 base_url="http://statekeeper.test", timeout=60.0) as http:
        approval_id = f"support-{'x' * 1000}~{'0' * 12}"
        decided = await http.post(f"/approvals/{approval_id}", json={"decision": "approve", "approver": "sup-1"})
        assert decided.status_code == 404, decided.text
        assert decided.json()["detail"].endswith("... does not exist")
