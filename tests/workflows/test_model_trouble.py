"""Model trouble ends with a person: after two user turns in a row without a usable proposal
from the model (output cut off by ``max_tokens``, a malformed proposal), the conversation is
handed to a human agent with a ticket that says why, the status is transferred, and the user is
told so once instead of being apologised to turn after turn; a usable turn in between starts the
count again.

SupportWorkflow on a real Temporal dev server, a real worker and the retail system of record;
the model is the offline stand-in over the Anthropic SDK or a test brain.
"""

from __future__ import annotations

import uuid

import pytest

from starter.client.conversations import ConversationError
from systems.model.server import offline_brain
from tests.policy_fixtures import EMAIL, PENDING
from tests.workflow_harness import reply, running_worker
from workflows.domain.replies import MODEL_TROUBLE, model_trouble_handed_over


async def test_two_turns_of_cut_off_output_hand_the_conversation_to_a_person_once(temporal_env, settings):
    tight = settings.model_copy(update={"model_max_tokens": 8})  # every proposal is longer than 8 tokens
    async with running_worker(temporal_env, tight, brain=offline_brain) as (client, backend):
        cid = await client.start_conversation(f"trouble-{uuid.uuid4().hex[:6]}")
        first = await client.send_message(cid, "Hi, I'm Raj Sanchez")
        assert first.text == MODEL_TROUBLE and first.status == "active"
        second = await client.send_message(cid, "My zip code is 92147")
        assert second.text == model_trouble_handed_over([], []) and second.status == "transferred"
        [ticket] = backend.tickets("main")
        assert ticket["ticket_key"] == f"transfer:{cid}:t2"
        assert "no usable answer for 2 user turns in a row" in ticket["summary"]
        assert "max_tokens" in ticket["summary"]  # why, in the operator's words
        state = await client.state(cid)
        assert state.status.value == "transferred" and state.model_trouble_turns == 2
        assert sum(1 for t in state.recent_turns if t.text == MODEL_TROUBLE) == 1  # apologised to once
        with pytest.raises(ConversationError):
            await client.send_message(cid, "Hello?")
        assert len(backend.tickets("main")) == 1


async def test_a_usable_turn_in_between_starts_the_count_again(temporal_env, settings):
    broken = {"kind": "tool_call", "tool": {"name": "get_order_details", "arguments": {"order": 1}}}
    script = {1: broken, 2: reply("Hello! How can I help?"), 3: broken}

    def brain(view: dict, plan=None) -> dict:
        return script.get(view["turn"], reply("ok"))

    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = await client.start_conversation(f"trouble-reset-{uuid.uuid4().hex[:6]}")
        assert (await client.send_message(cid, "Hi")).text == MODEL_TROUBLE
        assert (await client.send_message(cid, "Hello again")).text == "Hello! How can I help?"
        third = await client.send_message(cid, f"Where is {PENDING}? My email is {EMAIL}")
        assert third.text == MODEL_TROUBLE and third.status == "active"
        assert (await client.state(cid)).model_trouble_turns == 1 and backend.tickets("main") == []
