"""Prompt versions that withhold tools: the wire schema offers only the version's tools, the
offline stand-in reads them from the request and never calls another, and an unknown
version is a clear error."""

from __future__ import annotations

import json

import pytest

import tests.core.test_offline_model as offline
from activities.llm.wire import (_described_schema, _flattened_schema, _lean_schema, build_create_kwargs,
                                 propose_input_schema)
from starter.ops.backtest import BacktestError, check_prompt_version
from systems.model.server import offline_brain
from systems.model.view import honour_offered
from systems.model.wire import offered_tool_names
from workflows.domain.actions import parse_proposed_action
from workflows.domain.catalogue import CATALOGUE
from workflows.domain.catalogue.memory import MEMORY_TOOLS
from workflows.domain.prompt import (
    FIRST_CACHED_VERSION,
    FIRST_MEMORY_VERSION,
    LAST_CACHED_VERSION,
    LEAN_WITHOUT_MEMORY_VERSION,
    PROMPT_VERSION,
    PROMPT_VERSIONS,
    SINGLE_LAYOUT_VERSION,
    UnknownPromptVersion,
    render_request,
    render_system,
    state_view,
    tool_catalogue,
)
from workflows.domain.state import ConversationState

NO_RETURNS = f"{PROMPT_VERSION}-no-returns"
NO_ORDER_READS = f"{PROMPT_VERSION}-no-order-reads"
RETURN = "return_delivered_order_items"


def kwargs_for(version: str) -> dict:
    view = state_view(ConversationState(conversation_id="c-1"))
    return build_create_kwargs(render_request(view, version), model="m", max_tokens=100, conversation_id="c-1",
                               prompt_version=version)


def schema_tools(schema: dict) -> set[str]:
    tool = schema["properties"]["tool"]
    if "oneOf" not in tool:  # the lean layout: one name enum, each tool a line of the description
        assert all(f"\n{name}(" in tool["description"] for name in tool["properties"]["name"]["enum"])
        return set(tool["properties"]["name"]["enum"])
    defs = schema["$defs"]
    return {defs[ref["$ref"].rsplit("/", 1)[-1]]["properties"]["name"]["const"] for ref in tool["oneOf"]}


@pytest.mark.parametrize("version", sorted(PROMPT_VERSIONS))
def test_every_version_withholds_only_catalogue_tools_and_offers_the_rest_on_the_wire(version):
    withheld = PROMPT_VERSIONS[version].withheld_tools
    assert withheld <= set(CATALOGUE) and version.startswith(
        (PROMPT_VERSION, FIRST_MEMORY_VERSION, LEAN_WITHOUT_MEMORY_VERSION, LAST_CACHED_VERSION, FIRST_CACHED_VERSION,
             SINGLE_LAYOUT_VERSION))
    schema = kwargs_for(version)["tools"][0]["input_schema"]
    assert schema_tools(schema) == set(CATALOGUE) - withheld
    assert {t["name"] for t in tool_catalogue(version)} == set(CATALOGUE) - withheld
    # what the stand-in reads from the request is exactly what the schema offers
    assert offered_tool_names(json.loads(json.dumps(kwargs_for(version)))) == set(CATALOGUE) - withheld


def test_the_no_returns_schema_leaves_out_the_return_tool_and_its_argument_model():
    schema = propose_input_schema(NO_RETURNS)
    assert RETURN not in schema_tools(schema) and RETURN not in json.dumps(schema)
    assert RETURN not in render_system(NO_RETURNS)
    cached = propose_input_schema(f"{LAST_CACHED_VERSION}-no-returns")
    assert RETURN not in schema_tools(cached)
    assert not {"ReturnDeliveredOrderItemsCall", "ReturnDeliveredOrderItemsArgs"} & set(cached["$defs"])
    assert f'"name":"{RETURN}"' in render_system(SINGLE_LAYOUT_VERSION)  # the single layout lists tools
    assert f'"name":"{RETURN}"' not in render_system(f"{SINGLE_LAYOUT_VERSION}-no-returns")
    # the current version withholds only the memory's read (it runs without the model)
    assert propose_input_schema() == propose_input_schema(PROMPT_VERSION) == _lean_schema(PROMPT_VERSION)
    assert PROMPT_VERSIONS[PROMPT_VERSION].withheld_tools == {"get_remembered_facts"}
    # the versions before memory withhold only the memory tools
    assert propose_input_schema(LAST_CACHED_VERSION) == _described_schema(MEMORY_TOOLS)
    assert propose_input_schema(SINGLE_LAYOUT_VERSION) == _flattened_schema(MEMORY_TOOLS)
    assert propose_input_schema(f"{PROMPT_VERSION}-no-memory") == propose_input_schema(LEAN_WITHOUT_MEMORY_VERSION)
    assert RETURN in schema_tools(propose_input_schema())
    # the cached and lean layouts name each tool's class and description in the schema, the one place
    for version in (PROMPT_VERSION, LAST_CACHED_VERSION):
        sent = kwargs_for(version)["tools"][0]["input_schema"]
        assert sent == propose_input_schema(version)  # what is sent is the version's schema
        assert "irreversible_write:" in json.dumps(sent) and RETURN not in render_system(version)


def test_withholding_every_tool_leaves_no_tool_call_kind():
    schema = _flattened_schema(frozenset(CATALOGUE))
    assert "tool" not in schema["properties"] and "tool_call" not in schema["properties"]["kind"]["enum"]
    body = {"tools": [{"name": "propose_action", "input_schema": schema}]}
    assert offered_tool_names(body) == frozenset()


def test_a_request_without_an_enumerating_schema_sets_no_limit():
    assert offered_tool_names({"tools": []}) is None
    free = {"type": "object", "properties": {"tool": {"type": "object", "properties": {"name": {"type": "string"}}}}}
    assert offered_tool_names({"tools": [{"name": "propose_action", "input_schema": free}]}) is None


def test_an_unknown_prompt_version_is_a_clear_error():
    with pytest.raises(UnknownPromptVersion):
        kwargs_for("2019-01-01")
    with pytest.raises(UnknownPromptVersion):
        propose_input_schema("nope")
    with pytest.raises(BacktestError, match=f"unknown prompt version 'nope'; known: {SINGLE_LAYOUT_VERSION}, .*{PROMPT_VERSION}, "):
        check_prompt_version("nope")
    assert check_prompt_version(NO_RETURNS) == NO_RETURNS


def test_a_withheld_call_becomes_a_transfer_and_others_pass():
    offered = frozenset(CATALOGUE) - {RETURN}
    ret = offline.call(RETURN, order_id="#W1", item_ids=["1"], payment_method_id="p")
    assert honour_offered(ret, offered)["kind"] == "transfer_to_human"
    assert honour_offered(ret, None) == ret
    read = offline.call("get_order_details", order_id="#W1")
    assert honour_offered(read, offered) == read
    assert honour_offered({"kind": "reply", "text": "hi"}, frozenset()) == {"kind": "reply", "text": "hi"}


def dev_views(monkeypatch, task: dict) -> list[tuple[dict, dict]]:
    """Every (view, plan) the offline model answers while the task is driven to its end."""
    seen: list[tuple[dict, dict]] = []

    def recording(view, plan=None):
        seen.append((view, plan))
        return offline_brain(view, plan)

    monkeypatch.setattr(offline, "offline_brain", recording)
    offline.drive(task)
    return seen


@pytest.mark.parametrize("task_index", range(20))
def test_on_every_dev_task_view_the_stand_in_never_calls_a_withheld_tool(monkeypatch, task_index):
    task = offline.dev_tasks()[task_index]
    returns = any(a["name"] == RETURN for a in task["actions"])
    for view, plan in dev_views(monkeypatch, task):
        full = offline_brain(view, plan)
        for version in (NO_RETURNS, NO_ORDER_READS):
            offered = frozenset(CATALOGUE) - PROMPT_VERSIONS[version].withheld_tools
            for action in _each(offline_brain(view, plan, offered)):
                parse_proposed_action(action)
                assert action["kind"] != "tool_call" or action["tool"]["name"] in offered
        no_returns = offline_brain(view, plan, frozenset(CATALOGUE) - {RETURN})
        if _calls(full) == [RETURN]:
            assert no_returns["kind"] == "transfer_to_human"
        if not returns:
            assert no_returns == full  # a task without a return is answered alike
        no_reads = offline_brain(view, plan, frozenset(CATALOGUE) - {"get_order_details"})
        if _calls(full) == ["get_order_details"]:
            # the order read is skipped: the plan's write is proposed at once, and the policy decides
            assert no_reads["kind"] == "tool_call" and no_reads["tool"]["name"] in {a["name"] for a in task["actions"]}


def _each(answer) -> list[dict]:
    """The actions of one answer: one, or the reads proposed together."""
    return answer if isinstance(answer, list) else [answer]


def _calls(answer) -> list[str]:
    """The tools one answer calls, in order (empty for a reply, an end or a transfer)."""
    return [a["tool"]["name"] for a in _each(answer) if a["kind"] == "tool_call"]
