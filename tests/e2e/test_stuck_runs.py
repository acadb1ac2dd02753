"""Stuck runs in plain sight, from the outside: a conversation whose workflow tasks keep
failing (made so on purpose: a worker whose workflow code raises, as after a bad deploy) is
refused with 409 and ``Refusal-Kind: stuck`` in plain words (never "Temporal is not
reachable"), found by ``GET /conversations?status=stuck`` (and not under ``active``), counted
by ``/healthz``, listed by ``statekeeper stuck`` with the commands to act, and leaves all of
them once a good worker runs it again (the refused message, sent again then, handled once).
Another conversation on the same queue is never reported stuck.

The dev server is shared by the whole session: other tests' runs may be stuck too, so the
lists are checked for this test's ids only, never for equality. Each phase's time is printed
(``-s``): docs/operators.md "Stuck runs" reports them.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable, Optional

import httpx
from temporalio import workflow
from temporalio.worker import Worker

from starter.api.application import create_app
from starter.cli.health import render
from starter.client.conversations import StatekeeperClient
from tests.policy_fixtures import EMAIL

STUCK_WITHIN_SECONDS = 15.0
"""Documented: marked within about 5 s of the first failure (a 4 s workflow task timeout and
the second problem in a row); the rest is slack for a loaded machine."""


@workflow.defn(name="SupportWorkflow", sandboxed=False)
class BrokenSupportWorkflow:
    """The conversation workflow as a bad deploy leaves it: its code fails on every task."""

    @workflow.run
    async def run(self, _: Any) -> None:
        raise RuntimeError("a bug in the deployed workflow code")


@asynccontextmanager
async def _api(client: StatekeeperClient) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(lambda: client)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
                                 base_url="http://statekeeper.test", timeout=60.0) as http:
        yield http


async def _until(check: Callable[[], Awaitable[Optional[Any]]], seconds: float) -> Optional[Any]:
    deadline = time.monotonic() + seconds
    while True:
        result = await check()
        if result or time.monotonic() > deadline:
            return result
        await asyncio.sleep(0.2)


async def _listed_stuck(http: httpx.AsyncClient, conversation_id: str) -> Optional[dict]:
    items = (await http.get("/conversations", params={"status": "stuck", "limit": 100})).json()["items"]
    return next((item for item in items if item["conversation_id"] == conversation_id), None)


async def test_a_conversation_whose_workflow_tasks_keep_failing_is_reported_stuck_until_a_good_worker_runs_it(
        temporal_env, settings):
    from starter.runtime.worker import build_backend, build_worker

    backend = build_backend(settings)
    client = StatekeeperClient(temporal_env.client, settings.task_queue)
    stuck_id, healthy_id = f"stuck-{uuid.uuid4().hex[:8]}", f"healthy-{uuid.uuid4().hex[:8]}"
    async with _api(client) as http:
        async with build_worker(temporal_env.client, settings, backend):
            for cid in (stuck_id, healthy_id):
                started = await http.post("/conversations", json={"conversation_id": cid, "text": f"Hi, my email is {EMAIL}"})
                assert started.status_code == 201, started.text

        async with Worker(temporal_env.client, task_queue=settings.task_queue, workflows=[BrokenSupportWorkflow]):
            sent = time.monotonic()
            answered: dict[str, float] = {}

            async def message() -> httpx.Response:
                response = await http.post(f"/conversations/{stuck_id}/messages",
                                           json={"text": "What is the status of my order?", "message_id": "m-2"})
                answered["after"] = time.monotonic() - sent
                return response

            sending = asyncio.ensure_future(message())
            listed = await _until(lambda: _listed_stuck(http, stuck_id), STUCK_WITHIN_SECONDS)
            listed_after = time.monotonic() - sent
            assert listed is not None and listed["status"] == "stuck", listed
            refused, refused_after = await sending, answered["after"]
            assert refused.status_code == 409, refused.text
            assert refused.headers["Refusal-Kind"] == "stuck"
            detail = refused.json()["detail"]
            assert f"conversation {stuck_id} is stuck since " in detail and "until an operator acts" in detail, detail
            assert "not reachable" not in detail and "RuntimeError" not in detail and "support-" not in detail
            assert 'message_id "m-2"' in detail  # sent again with the same id once it moves: handled once

            assert await _listed_stuck(http, healthy_id) is None
            active = (await http.get("/conversations", params={"status": "active", "limit": 100})).json()["items"]
            assert stuck_id not in {item["conversation_id"] for item in active}  # listed once, as stuck

            state = await http.get(f"/conversations/{stuck_id}")
            assert state.status_code == 409 and state.headers["Refusal-Kind"] == "stuck", state.text
            health = await http.get("/healthz")
            assert health.status_code == 200 and health.json()["stuck"] >= 1, health.text

            runs = await client.stuck_runs()
            run = next(r for r in runs if r.process_id == stuck_id)
            assert run.process == "conversation" and run.workflow_id == f"support-{stuck_id}" and run.attempt >= 3
            assert run.since is not None and abs(run.since.timestamp() - (time.time() - (time.monotonic() - sent))) < 5
            assert all(r.process_id != healthy_id for r in runs)
            shown = render([run], "127.0.0.1:7233", "default", "http://127.0.0.1:8233")
            assert f"statekeeper resume {stuck_id}" in shown
            assert f"temporal workflow terminate --address 127.0.0.1:7233 --namespace default --workflow-id " \
                   f"support-{stuck_id}" in shown

        async with build_worker(temporal_env.client, settings, backend):
            fixed = time.monotonic()
            cleared = await _until(lambda: _cleared(http, stuck_id), 30.0)
            cleared_after = time.monotonic() - fixed
            assert cleared, "the mark did not clear within 30 s of a good worker starting"
            again = await http.post(f"/conversations/{stuck_id}/messages",
                                    json={"text": "What is the status of my order?", "message_id": "m-2"})
            assert again.status_code == 200, again.text
            state = (await http.get(f"/conversations/{stuck_id}")).json()
            assert state["status"] == "active" and state["turn"] == 2  # the refused message, handled once
            other = await http.post(f"/conversations/{healthy_id}/messages", json={"text": "thanks", "message_id": "m-2"})
            assert other.status_code == 200, other.text
    print(f"\nstuck runs: listed stuck {listed_after:.1f} s after the message was sent (its first workflow task "
          f"failed at once); the message refused {refused_after:.1f} s after sending; the mark cleared "
          f"{cleared_after:.1f} s after a good worker started")


async def _cleared(http: httpx.AsyncClient, conversation_id: str) -> bool:
    return await _listed_stuck(http, conversation_id) is None
