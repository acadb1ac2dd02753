"""``get_item_details`` (τ²-bench retail): the catalogue's proof that a tool is one spec
plus one system function. Its answer through the system, and a conversation in which the
model looks an item up and the observation reaches the state."""

from __future__ import annotations

import json
from typing import Optional

from systems.retail import load_data
from systems.retail.tools import run_tool
from tests.policy_fixtures import EMAIL
from tests.workflow_harness import running_worker


def _an_item() -> tuple[str, str, dict]:
    product_id, product = next(iter(load_data()["products"].items()))
    item_id, variant = next(iter(product["variants"].items()))
    return item_id, product_id, variant


def test_the_system_answers_an_item_or_not_found():
    item_id, product_id, variant = _an_item()
    found = json.loads(run_tool(load_data(), "get_item_details", {"item_id": item_id}))
    assert found == {"item_id": item_id, "product_id": product_id, "options": variant["options"],
                     "available": variant["available"], "price": variant["price"]}
    assert run_tool(load_data(), "get_item_details", {"item_id": "0000000000"}) == "Error: item not found"


async def test_a_conversation_looks_up_an_item(temporal_env, settings):
    item_id, product_id, variant = _an_item()

    def brain(view: dict, plan: Optional[dict] = None) -> dict:
        if view["customer"] is None:
            return {"kind": "tool_call", "tool": {"name": "find_user_id_by_email", "arguments": {"email": EMAIL}}}
        looked = {o["arguments"]["item_id"] for o in view["observations"] if o["tool"] == "get_item_details"}
        for wanted in (item_id, "0000000000"):
            if wanted not in looked:
                return {"kind": "tool_call", "tool": {"name": "get_item_details", "arguments": {"item_id": wanted}}}
        return {"kind": "reply", "text": "Here is that item."}

    async with running_worker(temporal_env, settings, brain=brain) as (client, _):
        cid = await client.start_conversation("item-details")
        reply = await client.send_message(cid, f"Hi, my email is {EMAIL}; what is item {item_id}?")
        assert reply.text == "Here is that item."
        state = await client.state(cid)
    results = {o.arguments["item_id"]: o.result for o in state.observations if o.tool == "get_item_details"}
    assert json.loads(results[item_id])["product_id"] == product_id
    assert json.loads(results[item_id])["price"] == variant["price"]
    assert results["0000000000"] == "Error: item not found"
    assert state.rejections == []
