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

from systems.model.server import StoppedEarly, offline_brain
from tests.policy_fixtures import EMAIL, PENDING
from tests.workflow_harness import call, running_worker
from workflows.domain.actions import parse_proposed_action
from workflows.domain.policy.validator import validate_proposal
from workflows.domain.replies import MODEL_TROUBLE, model_trouble_handed_over

FIRST, LAST, ZIP = "Raj", "Sanchez", "92147"
"""The customer of ``tests.policy_fixtures`` by name and zip code."""


async def test_a_cut_off_proposal_is_never_acted_on(temporal_env, settings):
    # the name and the zip code come in two messages, so no read follows from one message alone
    # (the workflow reads a customer itself only from an email, or a name and zip, of one
    # message): the lookup by both is the model's proposal, the only way it could run
    tight = settings.model_copy(update={"model_max_tokens": 8})  # every proposal is longer than 8 tokens
    proposed = []

    def brain(view: dict, plan=None):
        action = offline_brain(view, plan)
        proposed.append((view["turn"], action))
        return action

    async with running_worker(temporal_env, tight, brain=brain) as (client, backend):
        cid = await client.start_conversation(f"cut-off-{uuid.uuid4().hex[:6]}")
        assert (await client.send_message(cid, f"Hi, I'm {FIRST} {LAST}")).text == MODEL_TROUBLE
        reply = await client.send_message(cid, f"My zip code is {ZIP}")
        assert reply.text == model_trouble_handed_over([], [])  # the second turn in a row: to a person
        lookup = call("find_user_id_by_name_zip", first_name=FIRST, last_name=LAST, zip=ZIP)
        assert (2, lookup) in proposed  # the model proposed the lookup (its output was cut off)
        state = await client.state(cid)
        assert state.customer is None and state.observations == []  # the lookup it proposed never ran
        assert state.rejections and all(r.rule == "malformed-model-output" for r in state.rejections)
        assert "stop_reason='max_tokens'" in state.rejections[-1].reason
        assert backend.ledger_entries("main") == []


@pytest.mark.parametrize("stop_reason", ["refusal", "pause_turn"])
async def test_a_refused_or_paused_proposal_is_never_acted_on(temporal_env, settings, stop_reason):
    # the message names no order: the workflow authenticates the customer and loads their
    # profile from the email, and reading the order is left to the model's proposal
    calls = []
    read_pending = call("get_order_details", order_id=PENDING)

    def brain(view: dict, plan=None):
        calls.append(view["turn"])
        # a valid, complete-looking proposal: only the stop reason says it is not finished
        return StoppedEarly(stop_reason, read_pending)

    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = await client.start_conversation(f"{stop_reason}-{uuid.uuid4().hex[:6]}")
        reply = await client.send_message(cid, f"Hi, my email is {EMAIL}; where is my latest order?")
        assert reply.text == MODEL_TROUBLE
        state = await client.state(cid)
        assert state.customer is not None and state.customer.details_loaded
        # the read is one the policy accepts now: only the stop reason kept it from running
        assert validate_proposal(state, parse_proposed_action(read_pending)).accepted
        assert state.orders == {} and state.observations == []  # the read it proposed never ran
        assert state.rejections and all(r.rule == "malformed-model-output" for r in state.rejections)
        assert f"stop_reason='{stop_reason}'" in state.rejections[-1].reason
        assert len(calls) >= 2  # retried as malformed before it was recorded as a rejection
        assert backend.ledger_entries("main") == []
