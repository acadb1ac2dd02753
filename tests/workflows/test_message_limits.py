"""Message limits in running conversations: a message is at most 8192 bytes of encodable
text (refused as ``invalid_message`` otherwise), and no sequence of legal messages, nor a
model that keeps proposing refused writes, grows the state or the model input past
Temporal's payload limits and kills the conversation.

SupportWorkflow on a real Temporal dev server, a real worker and SQLite; only the model
is faked, at its boundary. The pure prompt bounds are tests/core/test_prompt.py.

These cases come from two adversarial reviews of the code of that day; each docstring
describes the defect as it was found (file:line references are as of the review). All
are fixed now, and each test keeps guarding against its return.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from starter.client.conversations import ConversationError
from tests.policy_fixtures import EMAIL
from tests.workflow_harness import call, running_worker
from workflows.conversation.workflow import support_workflow_id

FS = "\x1c"
PAD = "\t"
"""Whitespace to a regex `\\s` and legal in a message (FS, a control character, is refused at the edge now)."""


async def _died(env, cid: str, err: BaseException) -> str:
    desc = await env.client.get_workflow_handle(support_workflow_id(cid)).describe()
    return f"{type(err).__name__} {getattr(err, 'kind', '')} {str(err)[:300]}; workflow {desc.status.name}"


# --- the byte limit --------------------------------------------------------------------


async def test_exact_8192_bytes_multibyte_accepted_8193_rejected(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, _):
        cid = await client.start_conversation(f"boundary-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        ok = "\u20ac" * 2730 + "ab"  # 3 * 2730 + 2 = 8192 bytes
        assert len(ok.encode()) == 8192
        await client.send_message(cid, ok)
        with pytest.raises(ConversationError) as err:
            await client.send_message(cid, ok + "a")
        assert err.value.kind == "invalid_message"
        with pytest.raises(ConversationError) as err:
            await client.send_message(cid, "\u20ac" * 2731)  # 8193 bytes, 2731 chars
        assert err.value.kind == "invalid_message"


async def test_client_refuses_unencodable_text_as_invalid_message(temporal_env, settings):
    """starter/client/conversations.py: refusals raise ConversationError(kind='invalid_message'). A lone
    surrogate makes the pydantic converter raise PydanticSerializationError instead."""
    async with running_worker(temporal_env, settings) as (client, _):
        cid = await client.start_conversation(f"surrogate-{uuid.uuid4().hex[:6]}")
        with pytest.raises(ConversationError) as err:
            await client.send_message(cid, "hello \ud800")
        assert err.value.kind == "invalid_message"


# --- bounded state: legal messages do not kill the conversation ------------------------


async def test_many_legal_messages_do_not_kill_the_conversation(temporal_env, settings):
    """Each message is <= 8 KB (accepted by the validator). Every 5-digit number is pinned
    forever and rendered into every model snapshot (an activity input). After ~25 messages
    the snapshot passes Temporal's 2 MB payload limit and the conversation dies."""
    async with running_worker(temporal_env, settings) as (client, _):
        cid = await client.start_conversation(f"big-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        for turn in range(32):
            words, n = [], 0
            while len(" ".join(words)) < 8180:
                words.append(f"{(turn * 2000 + n) % 100000:05d}")
                n += 1
            text = " ".join(words)
            assert len(text.encode()) <= 8192
            try:
                r = await asyncio.wait_for(client.send_message(cid, text), 60)
            except (ConversationError, asyncio.TimeoutError) as err:
                desc = await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).describe()
                pytest.fail(f"message {turn + 2} (legal, {len(text.encode())} bytes): {type(err).__name__} "
                            f"{getattr(err, 'kind', '')} {err}; workflow {desc.status.name}")
            assert r.status == "active"


async def test_legal_messages_with_padded_names_do_not_kill_the_conversation(temporal_env, settings):
    """Each message is legal (< 8 KB, accepted by the validator): "i am" + 8100 x '\\t'
    (whitespace to the regex; the review used '\\x1c', now refused as a control character)
    + a new name. workflows/domain/facts.py:26,74 pins the whole span as
    the fact's verbatim, forever; MAX_PINNED_FACTS counts facts, not bytes. The snapshot
    (activity input) and the state (continue-as-new input) pass Temporal's 2 MB payload
    limit after ~30 messages and the conversation dies."""
    async with running_worker(temporal_env, settings) as (client, _):
        cid = await client.start_conversation(f"pad-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        for i in range(40):
            first = "A" + "".join("abcdefghijklmnop"[(i >> k) & 15] for k in range(0, 16, 4))
            text = "i am" + PAD * 8100 + f" {first} Smith"
            assert len(text.encode()) <= 8192
            try:
                r = await asyncio.wait_for(client.send_message(cid, text), 60)
            except (ConversationError, asyncio.TimeoutError) as err:
                pytest.fail(f"legal message {i + 2}: {await _died(temporal_env, cid, err)}")
            assert r.status == "active"


async def test_model_repeating_refused_proposals_does_not_kill_the_conversation(temporal_env, settings):
    """A confused model alternates a `think` (accepted, resets the rejection streak) with a
    refused write: 15 rejections per user turn, each keeping its whole proposal
    (state.rejections is never trimmed, workflows/domain/transitions.py:59). The prompt windows
    them (5), but the state is the continue-as-new input and grows ~70 KB per turn."""
    n = {"calls": 0}

    def brain(view: dict, plan: dict | None = None) -> dict:
        n["calls"] += 1
        if n["calls"] % 2:
            return call("think", thought="let me try the address again")
        return call("modify_user_address", user_id="someone_else_1234", address1=FS * 200, address2=FS * 200,
                    city=FS * 100, state=FS * 100, country=FS * 100, zip=FS * 20)

    # room for the padded proposal: cut off at 1,024 tokens it would be malformed output,
    # retried with back-off, instead of the policy rejection this test is about
    roomy = settings.model_copy(update={"model_max_tokens": 4096})
    async with running_worker(temporal_env, roomy, brain=brain) as (client, _):
        cid = await client.start_conversation(f"rej-{uuid.uuid4().hex[:6]}")
        sizes = []
        for turn in range(8):
            try:
                r = await asyncio.wait_for(client.send_message(cid, f"please change my address ({turn})"), 60)
            except Exception as err:  # noqa: BLE001 - a stuck update surfaces as an SDK timeout, not ConversationError
                pytest.fail(f"turn {turn + 1}: {await _died(temporal_env, cid, err)}")
            assert r.status == "active"
            sizes.append(len((await client.state(cid)).model_dump_json()))
        # 15 rejections a turn fill the state's window after 4 turns; from then on it must not grow
        assert sizes[-1] - sizes[4] < 2_000, f"the state keeps growing: {sizes}"
