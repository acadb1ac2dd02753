"""Model output integrity, parallel tool use: the request forbids it
(``disable_parallel_tool_use``), and a response with two ``propose_action`` calls anyway is
malformed (retried, then a rejection), never read as its first call only: the second
proposal would be silently dropped, the same loss as a cut-off input. (From a review.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from activities.llm.wire import MalformedOutput, build_create_kwargs, read_proposal
from workflows.domain.prompt import ModelSnapshot


def _block(order_id: str) -> SimpleNamespace:
    return SimpleNamespace(type="tool_use", name="propose_action", input={
        "kind": "tool_call", "tool": {"name": "get_order_details", "arguments": {"order_id": order_id}}})


def test_two_tool_calls_in_one_response_are_not_half_acted_on():
    message = SimpleNamespace(stop_reason="tool_use", content=[_block("#W1"), _block("#W2")], model="m")
    request = build_create_kwargs(ModelSnapshot(system="s", content="c"), model="m", max_tokens=100,
                                  conversation_id="c")
    assert request["tool_choice"]["disable_parallel_tool_use"] is True
    with pytest.raises(MalformedOutput, match="2 tool calls"):
        read_proposal(message)
