"""Hostile and oversized messages in running conversations:

- crafted messages (the nested ``<script>`` message, an id in full-width digits, NUL and other
  control characters, a database error's text) are answered or refused with a clear reason,
  and the conversation's state is exactly as it was (a refused message never enters history)
  or has moved on by that one ordinary turn;
- message limits: a message is at most 8192 bytes of encodable text (refused as
  ``invalid_message`` otherwise), and no sequence of legal messages, nor a model that keeps
  proposing refused writes, grows the state or the model input past Temporal's payload limits
  and kills the conversation.

SupportWorkflow on a real Temporal dev server, a real worker and SQLite; the model is the
offline stand-in or a test brain (faked at its boundary); the database failure is injected
through the tool port. The pure prompt bounds are tests/core/test_prompt.py.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any, Optional

import pytest
import sqlalchemy
from temporalio.client import WorkflowUpdateFailedError

from activities.ports import Guard
from starter.client.conversations import ConversationError
from tests.policy_fixtures import CUSTOMER, EMAIL, PENDING
from tests.workflow_harness import call, reply, running_worker
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id
from workflows.domain import replies
from workflows.domain.contracts import ToolResult, UserMessage


# --- Crafted messages ---

NESTED_SCRIPT = "<script>" + "[" * 1200 + "]" * 1200 + "</script>"
SQL_TEXT = 'connection to server at "10.20.30.40", port 5432 failed: Connection refused'


async def _updates_accepted(env, cid: str) -> int:
    """How many updates (messages) entered the conversation's history."""
    history = await env.client.get_workflow_handle(support_workflow_id(cid)).fetch_history()
    return sum(1 for e in history.events if e.HasField("workflow_execution_update_accepted_event_attributes"))


async def test_the_nested_script_message_is_an_ordinary_turn(temporal_env, settings):
    """A legal 2.4 KB message with a deeply nested <script>[[[…]]]</script> raises no
    RecursionError in fact pinning (which would fail the workflow task and turn the next calls
    into 503s). It is text: answered, pinned nothing, and the next message works."""
    async with running_worker(temporal_env, settings) as (client, _):
        cid = await client.start_conversation(f"nested-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        before = await client.state(cid)
        answer = await client.send_message(cid, NESTED_SCRIPT)
        assert answer.status == "active" and answer.turn == before.turn + 1
        after = await client.state(cid)
        assert after.pinned_facts == before.pinned_facts and after.recent_turns[-2].text == NESTED_SCRIPT
        assert after.rejections == before.rejections
        follow = await client.send_message(cid, f"What is the status of order {PENDING}?")
        assert follow.status == "active" and PENDING in follow.text


async def test_an_id_in_full_width_digits_is_not_pinned_and_the_conversation_goes_on(temporal_env, settings):
    """"#W４５６６８０９" is not pinned as an order id (\\d would match any Unicode digit, and
    every later turn would try to read it and fail)."""
    async with running_worker(temporal_env, settings) as (client, _):
        cid = await client.start_conversation(f"fullwidth-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        first = await client.send_message(cid, "What is the status of order #W４５６６８０９?")
        state = await client.state(cid)
        assert [f.kind for f in state.pinned_facts] == ["email"] and "４" not in first.text
        second = await client.send_message(cid, f"Sorry, I mean {PENDING}: what is its status?")
        assert second.status == "active" and PENDING in second.text and "４" not in second.text
        assert PENDING in (await client.state(cid)).orders


async def test_nul_is_refused_at_the_client_and_by_the_update_validator(temporal_env, settings):
    """NUL and other control characters are refused at every edge with a clear reason: the
    client before sending, and the workflow's update validator for a caller that bypasses
    the client. A refused update never enters history: the state is exactly as it was."""
    async with running_worker(temporal_env, settings) as (client, _):
        cid = await client.start_conversation(f"nul-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        before, accepted = await client.state(cid), await _updates_accepted(temporal_env, cid)
        for text in ("hello\x00there", "\x1b[31mred", "bell\x07", "c1\x85control", "lone \ud800"):
            with pytest.raises(ConversationError) as refused:
                await client.send_message(cid, text)
            assert refused.value.kind == "invalid_message" and "U+" in str(refused.value)
        handle = temporal_env.client.get_workflow_handle(support_workflow_id(cid))
        with pytest.raises(WorkflowUpdateFailedError) as failed:
            await handle.execute_update(SupportWorkflow.send_message, UserMessage(text="hello\x00there"),
                                        id=f"raw-{uuid.uuid4().hex[:6]}")
        assert failed.value.cause.type == "InvalidMessage"
        assert "control character (U+0000 at position 5)" in failed.value.cause.message
        with pytest.raises(ConversationError) as refused:
            await client.cancel(cid, "bye\x00")
        assert refused.value.kind == "invalid"
        assert await _updates_accepted(temporal_env, cid) == accepted
        assert (await client.state(cid)).model_dump() == before.model_dump()
        assert (await client.send_message(cid, "tabs\tand\r\nnewlines are fine")).status == "active"


class FailingReads:
    """A ``ToolPort`` whose reads of ``tool`` raise what a database driver raises when its
    server is gone: SQLAlchemy's text, with the statement, its parameters (the customer's
    email) and the server's host and port; everything else goes to the port it was
    ``attach``-ed to (the harness attaches it like ``tests.faults.SlowReads``). ``failing``
    switches the fault."""

    def __init__(self, tool: str) -> None:
        self._inner: Any = None
        self._tool, self.failing = tool, True

    def attach(self, inner: Any) -> "FailingReads":
        self._inner = inner
        return self

    def invoke(self, store: str, tool: str, arguments: dict[str, Any], *, idempotency_key: Optional[str] = None,
               scope_user_id: Optional[str] = None, guard: Optional[Guard] = None) -> ToolResult:
        if self.failing and tool == self._tool and idempotency_key is None:
            raise sqlalchemy.exc.OperationalError("SELECT doc FROM users WHERE email_lc = ? AND order_id = ?",
                                                  (EMAIL, arguments.get("order_id")), Exception(SQL_TEXT))
        return self._inner.invoke(store, tool, arguments, idempotency_key=idempotency_key,
                                  scope_user_id=scope_user_id, guard=guard)

    def recorded(self, store: str, tool: str, arguments: dict[str, Any], idempotency_key: str) -> Optional[ToolResult]:
        return self._inner.recorded(store, tool, arguments, idempotency_key)

    def has_store(self, store: str) -> bool:
        return self._inner.has_store(store)


def _echo_brain(view: dict, plan: Optional[dict] = None) -> dict:
    """A model that reads the customer and the order, and tells the user the reason of the
    last refusal word for word (as a real model may) unless asked to try again: whatever a
    reason holds, users see."""
    customer = view.get("customer") or {}
    if not customer:
        return call("find_user_id_by_email", email=EMAIL)
    if not customer.get("details_loaded"):
        return call("get_user_details", user_id=CUSTOMER)
    if PENDING in (view.get("orders") or {}):
        return reply(f"Order {PENDING} is loaded.")
    said = [t["text"] for t in view.get("recent_turns") or [] if t.get("role") == "user"][-1]
    rejections = view.get("rejections") or []
    if rejections and "again" not in said:
        return reply(f"Sorry: {rejections[-1]['reason']}")
    return call("get_order_details", order_id=PENDING)


async def test_database_error_text_reaches_neither_the_state_nor_the_user(temporal_env, settings):
    """A rejection reason stored in the state (shown to the model, returned by the API) is the
    failure's kind, never a whole SQL statement with its parameters, and no connection error's
    hosts and ports reach the user's reply; the state is intact and the conversation goes on
    once the database is back."""
    failing = FailingReads("get_order_details")
    async with running_worker(temporal_env, settings, brain=_echo_brain, slow_reads=failing) as (client, _):
        cid = await client.start_conversation(f"sql-{uuid.uuid4().hex[:6]}")
        first = await client.send_message(cid, f"Hi, my email is {EMAIL}; where is {PENDING}?")
        assert first.text == replies.SYSTEM_UNAVAILABLE and first.status == "active"
        echoed = await client.send_message(cid, "What went wrong?")
        state = await client.state(cid)
        reason = state.rejections[-1].reason
        assert reason == "get_order_details failed: the order system could not be reached"
        assert echoed.text == f"Sorry: {reason}"
        shown = json.dumps(state.model_dump(mode="json")) + echoed.text + first.text
        for secret in ("SELECT", "email_lc", "10.20.30.40", "5432", "OperationalError", "Connection refused"):
            assert secret not in shown, secret
        assert state.customer.user_id == CUSTOMER and PENDING not in state.orders
        failing.failing = False
        later = await client.send_message(cid, f"Please try {PENDING} again")
        assert later.text == f"Order {PENDING} is loaded." and PENDING in (await client.state(cid)).orders


# --- Message limits ---

FS = "\x1c"
PAD = "\t"
"""Whitespace to a regex `\\s` and legal in a message (FS, a control character, is refused at the edge)."""


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
    """Refusals raise ConversationError(kind='invalid_message'), also for a lone surrogate, which
    the pydantic converter would refuse with PydanticSerializationError."""
    async with running_worker(temporal_env, settings) as (client, _):
        cid = await client.start_conversation(f"surrogate-{uuid.uuid4().hex[:6]}")
        with pytest.raises(ConversationError) as err:
            await client.send_message(cid, "hello \ud800")
        assert err.value.kind == "invalid_message"


# --- bounded state: legal messages do not kill the conversation ------------------------


async def test_many_legal_messages_do_not_kill_the_conversation(temporal_env, settings):
    """Each message is <= 8 KB (accepted by the validator). Every 5-digit number is pinned
    and rendered into model snapshots (activity inputs); unbounded, after ~25 messages the
    snapshot would pass Temporal's 2 MB payload limit and the conversation would die."""
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
    (whitespace to the regex; '\\x1c' is refused as a control character) + a new name. Fact
    pinning keeps the whole span as the fact's verbatim; unbounded in bytes, the snapshot
    (activity input) and the state (continue-as-new input) would pass Temporal's 2 MB payload
    limit after ~30 messages and the conversation would die."""
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
    refused write: 14 rejections per user turn, each keeping its whole proposal, before it gives
    up with a reply (a turn with no reply at all is model trouble, handed to a person after two).
    The prompt windows them (5); the state, the continue-as-new input, must stay bounded too
    (untrimmed rejections would grow it ~70 KB per turn)."""
    n = {"calls": 0}

    def brain(view: dict, plan: dict | None = None) -> dict:
        n["calls"] += 1
        if n["calls"] % 29 == 0:  # within the turn's 30 model calls
            n["calls"] = 0
            return reply("Sorry, I cannot change that address.")
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
        # 14 rejections a turn fill the state's window after 4 turns; from then on it must not grow
        assert sizes[-1] - sizes[4] < 2_000, f"the state keeps growing: {sizes}"
