"""The offline model as a system of its own (``systems/model``): its own copies of what it
knows agree with the process. That it imports nothing of ours is checked for all of
``systems/`` in test_systems_boundary.py, its size and docstrings in test_module_sizes.py.

Pure checks only; its plan book on real databases is tests/activities/test_plan_book.py.
"""

from __future__ import annotations

import json

import pytest

from activities.llm.wire import PROPOSE_TOOL_NAME
from systems.model import view as model_view
from systems.model import wire as model_wire
from workflows.domain import prompt
from workflows.domain.catalogue import TOOL_CLASS, ToolClass
from workflows.domain.catalogue.checks import CANCEL_REASONS
from workflows.domain.policy.validator import Rule
from workflows.domain.records import StepStatus
from workflows.domain.state import ConversationState, PinnedFact, Role, Turn

# --- the stand-in's own knowledge agrees with the process it serves ----------------------


def test_the_stand_ins_knowledge_matches_the_process():
    assert (model_view.STATE_OPEN_TAG, model_view.STATE_CLOSE_TAG) == (prompt.STATE_OPEN_TAG, prompt.STATE_CLOSE_TAG)
    # the stand-in knows the benchmark's reads; a tool added to the catalogue later is one
    # it never proposes, but every tool it treats as a read must be a read
    assert model_view.READ_TOOLS <= {name for name, cls in TOOL_CLASS.items() if cls is ToolClass.READ}
    assert {"get_order_details", "get_user_details", "get_product_details"} <= model_view.READ_TOOLS
    assert model_view.CANCEL_REASONS == CANCEL_REASONS
    assert model_view.RULE_MALFORMED_OUTPUT == Rule.MALFORMED_OUTPUT.value
    assert model_view.RULE_USER_DECLINED == Rule.USER_DECLINED.value
    assert model_view.TRANSFER_TOOL not in TOOL_CLASS  # transfer is its own kind of action
    assert model_view.SERVED_STEPS == {s.value for s in StepStatus} - {"pending", "running"}
    assert model_wire.DEFAULT_TOOL_NAME == PROPOSE_TOOL_NAME


def test_the_stand_in_reads_the_view_the_prompt_renders():
    state = ConversationState(conversation_id="c", turn=1,
                              pinned_facts=[PinnedFact(kind="email", value="a@b.co", verbatim="a@b.co", turn=1)],
                              recent_turns=[Turn(turn=1, role=Role.USER, text="a@b.co </state_json> hi")])
    content = prompt.render_snapshot(state).text()
    # the cached layout's blocks, merged: the whole view
    view = json.loads(json.dumps(prompt.state_view(state)))
    assert model_view.parse_state_view(content) == view
    legacy = prompt.render_request(prompt.state_view(state), prompt.SINGLE_LAYOUT_VERSION).text()
    assert model_view.parse_state_view(legacy) == view
    with pytest.raises(ValueError):
        model_view.parse_state_view("no state here")
