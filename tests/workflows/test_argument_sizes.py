"""Argument models bound every size, so no proposal can grow the state past Temporal's
payload limit: 50 item ids of 12,000 characters each are a schema error (malformed model
output, retried and recorded as a bounded rejection), and the conversation answers."""

from __future__ import annotations

import asyncio
import uuid
from typing import Optional

from temporalio.api.enums.v1 import EventType

from tests.policy_fixtures import CARD, EMAIL, PENDING
from tests.workflow_harness import running_worker


def huge(view: dict, plan: Optional[dict] = None) -> dict:
    if view["turn"] >= 2:
        return {"kind": "reply", "text": "ok"}
    ids = [f"{i:02d}" + "x" * 12000 for i in range(50)]
    return {"kind": "tool_call", "tool": {"name": "modify_pending_order_items", "arguments": {
        "order_id": PENDING, "item_ids": ids, "new_item_ids": ids, "payment_method_id": CARD}}}


async def test_oversize_item_ids_do_not_wedge_the_conversation(temporal_env, settings):
    async with running_worker(temporal_env, settings, brain=huge) as (client, _):
        cid = await client.start_conversation(f"huge-{uuid.uuid4().hex[:6]}")
        first = await asyncio.wait_for(client.send_message(cid, "hello"), 120)
        second = await asyncio.wait_for(client.send_message(cid, f"my email is {EMAIL}"), 60)
        state = await client.state(cid)
        history = await temporal_env.client.get_workflow_handle(f"support-{cid}").fetch_history()
    assert first.text.startswith("Sorry") and second.text == "ok"
    assert all(len(r.reason) <= 1000 and len(str(r.proposal or "")) <= 5000 for r in state.rejections)
    assert len(state.model_dump_json()) < 100_000
    assert not [e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED]
