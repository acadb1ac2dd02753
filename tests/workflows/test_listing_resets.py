"""A reset conversation is listed once, by its latest run: a reset terminates the run it
resets and starts a new run of the same workflow id with the same search attributes, so
``GET /conversations?order_id=`` (and every other filter both runs match) showed it twice, once
``terminated`` and once ``active``."""

from __future__ import annotations

import asyncio
import uuid

from tests.policy_fixtures import DELIVERED, EMAIL
from tests.resets import completed_tasks, reset_to
from tests.workflow_harness import running_worker, two_orders_brain


async def _listed(client, cid: str, **filters) -> list:
    page = await client.list_conversations(order_id=DELIVERED, limit=100, **filters)
    return [(item.status, item.step) for item in page.items if item.conversation_id == cid]


async def test_a_reset_conversation_is_listed_once_by_its_latest_run(temporal_env, settings):
    async with running_worker(temporal_env, settings, brain=two_orders_brain()) as (client, _):
        cid = await client.start_conversation(f"list-reset-{uuid.uuid4().hex[:6]}")
        workflow_id = f"support-{cid}"
        await client.send_message(cid, f"Hi, my email is {EMAIL}; where is {DELIVERED}?")
        first_run = (await temporal_env.client.get_workflow_handle(workflow_id).describe()).run_id
        # the last completed workflow task: the new run holds the same turn and the same order
        await reset_to(temporal_env, workflow_id, (await completed_tasks(temporal_env, workflow_id))[-1])

        # visibility is eventually consistent: wait until both runs are indexed, the old one closed
        for _ in range(100):
            runs = [w async for w in temporal_env.client.list_workflows(f"WorkflowId = '{workflow_id}'")]
            if len(runs) == 2 and any(r.run_id == first_run and r.status.name == "TERMINATED" for r in runs):
                break
            await asyncio.sleep(0.1)
        assert len(runs) == 2, "the reset made no second run; the test would prove nothing"

        assert await _listed(client, cid) == [("active", "active")]
        assert await _listed(client, cid, status="active") == [("active", "active")]
        assert await _listed(client, cid, status="terminated") == []
        # page by page: the replaced run is on none of the pages
        seen, token = [], None
        for _ in range(500):
            page = await client.list_conversations(order_id=DELIVERED, limit=2, next_page_token=token)
            seen += [item.conversation_id for item in page.items]
            token = page.next_page_token
            if token is None:
                break
        assert seen.count(cid) == 1, seen
