"""Model requests for the model activity's tests (tests/core/test_model_wire.py and
tests/activities/test_model_activity.py): a one-turn conversation state, its request,
and the ``ApplicationError`` an activity call fails with."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError

from activities.llm.model_activity import ModelActivities
from workflows.domain.contracts import ModelRequest
from workflows.domain.prompt import render_snapshot
from workflows.domain.state import ConversationState, PinnedFact, Role, Turn

MODEL = "test-model-1"


def email_state() -> ConversationState:
    return ConversationState(
        conversation_id="conv-1",
        turn=1,
        pinned_facts=[PinnedFact(kind="email", value="a.b@example.com", verbatim="a.b@example.com", turn=1)],
        recent_turns=[Turn(turn=1, role=Role.USER, text="Hi, I'm a.b@example.com and want to cancel an order")],
    )


def request(state: ConversationState | None = None) -> ModelRequest:
    state = state or email_state()
    return ModelRequest(conversation_id=state.conversation_id, snapshot=render_snapshot(state))


async def failure(acts: ModelActivities, req: ModelRequest) -> ApplicationError:
    with pytest.raises(ApplicationError) as info:
        await acts.propose_action(req)
    return info.value
