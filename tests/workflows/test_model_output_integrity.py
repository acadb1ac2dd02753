"""Model output integrity: a response that stopped before completing its tool call (cut off
by ``max_tokens``, as the offline stand-in does when the output would pass the request's
limit; a safety ``refusal``; a ``pause_turn``) is never acted on, even when its partial
input is a valid proposal: it is retried as malformed output, then recorded as a
rejection, and the user gets a plain apology.

SupportWorkflow on a real Temporal dev server, a real worker and the offline stand-in
model over the Anthropic SDK.
"""

from __future__ import annotations

import uuid

import pytest

from systems.model.server import StoppedEarly
from tests.policy_fixtures import EMAIL, PENDING
from tests.workflow_harness import call, running_worker
from workflows.domain.replies import MODEL_TROUBLE


async def test_a_cut_off_proposal_is_never_acted_on(temporal_env, settings):
    tight = settings.model_copy(update={"model_max_tokens": 8})  # every proposal is longer than 8 tokens
    async with running_worker(temporal_env, tight) as (client, backend):
        cid = await client.start_conversation(f"cut-off-{uuid.uuid4().hex[:6]}")
        reply = await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert reply.text == MODEL_TROUBLE
        state = await client.state(cid)
        assert state.customer is None and state.observations == []  # the lookup it proposed never ran
        assert state.rejections and all(r.rule == "malformed-model-output" for r in state.rejections)
        assert "stop_reason='max_tokens'" in state.rejections[-1].reason
        assert backend.ledger_entries("main") == []


@pytest.mark.parametrize("stop_reason", ["refusal", "pause_turn"])
async def test_a_refused_or_paused_proposal_is_never_acted_on(temporal_env, settings, stop_reason):
    calls = []

    def brain(view: dict, plan=None):
        calls.append(view["turn"])
        # a valid, complete-looking proposal: only the stop reason says it is not finished
        return StoppedEarly(stop_reason, call("get_order_details", order_id=PENDING))

    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = await client.start_conversation(f"{stop_reason}-{uuid.uuid4().hex[:6]}")
        reply = await client.send_message(cid, f"Hi, my email is {EMAIL}; where is {PENDING}?")
        assert reply.text == MODEL_TROUBLE
        state = await client.state(cid)
        assert state.orders == {} and state.observations == []  # the read it proposed never ran
        assert state.rejections and all(r.rule == "malformed-model-output" for r in state.rejections)
        assert f"stop_reason='{stop_reason}'" in state.rejections[-1].reason
        assert len(calls) >= 2  # retried as malformed before it was recorded as a rejection
        assert backend.ledger_entries("main") == []
