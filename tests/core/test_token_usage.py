"""Token usage accumulates in the state (uncached input, cache reads and writes, output,
model), shows in the operators' details, and drives the budget checks."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from workflows.conversation import budget
from workflows.domain import transitions as tr
from workflows.domain.contracts import SupportInput
from workflows.domain.state import ConversationState, Usage
from workflows.visibility import usage_line


def test_each_model_call_adds_its_usage_to_the_state():
    state = ConversationState(conversation_id="c")
    tr.record_usage(state, "model-a", 100, 20, cache_read_input_tokens=3000, cache_creation_input_tokens=500)
    tr.record_usage(state, "model-b", 50, 10, cache_read_input_tokens=3500)
    usage = state.usage
    assert (usage.model_calls, usage.input_tokens, usage.output_tokens) == (2, 150, 30)
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens, usage.model) == (6500, 500, "model-b")
    assert usage.total_tokens() == 150 + 30 + 6500 + 500
    # it survives the trip through JSON (the query, continue-as-new)
    assert ConversationState.model_validate_json(state.model_dump_json()).usage == usage


def test_the_details_show_usage_and_budget():
    usage = Usage(model_calls=3, input_tokens=1200, output_tokens=90, cache_read_input_tokens=9000,
                  cache_creation_input_tokens=4000, model="claude-x", budget_tokens=50000)
    line = usage_line(usage)
    assert "3 calls" in line and "14,290 tokens of a 50,000-token budget" in line
    assert "cache read 9,000" in line and "cache write 4,000" in line and "`claude-x`" in line


def test_budget_checks():
    state = ConversationState(conversation_id="c")
    assert not budget.over_budget(state) and budget.remaining_tokens(state) is None  # off by default
    tr.start_run(state, 1000)  # the run's budget, adopted by the state
    assert budget.remaining_tokens(state) == 1000
    tr.record_usage(state, "m", 600, 100)
    assert not budget.over_budget(state) and budget.remaining_tokens(state) == 300
    tr.record_usage(state, "m", 250, 50)
    assert budget.over_budget(state) and budget.remaining_tokens(state) == 0


@pytest.mark.parametrize("bad", [0, -5])
def test_a_budget_must_be_positive(bad):
    with pytest.raises(ValidationError):
        SupportInput(conversation_id="c", token_budget=bad)
    with pytest.raises(ValidationError):
        Usage(budget_tokens=bad)
    assert SupportInput(conversation_id="c").token_budget is None
