"""Ids near Temporal's length limit (``limit.maxIDLength``, 1000 bytes for a workflow or an
update id) through the Python client, on a real Temporal dev server with a real worker.

Before, Temporal's ``INVALID_ARGUMENT`` for an id over the limit came back as ``unavailable``
("Temporal is not reachable; retry later"), so the caller retried for ever: a message id or a
conversation id too long, an empty refund id; and a conversation whose id was long but
valid (its workflow id fits) had approvals nobody could decide, the decision's update id
(``decide-<approval id>-<decision>-<approver>``) being over the limit.
"""

from __future__ import annotations

import uuid

import pytest

from starter.client.conversations import ConversationError
from tests.policy_fixtures import EMAIL, PENDING
from tests.workflow_harness import order_details, running_worker, until
from workflows.domain.policy.approvals import ApprovalPolicy, ApprovalStatus


async def _refused(call, kind: str) -> str:
    with pytest.raises(ConversationError) as refused:
        await call
    assert refused.value.kind == kind, str(refused.value)
    return str(refused.value)


async def test_ids_too_long_for_temporal_are_refused_not_retried(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, _):
        cid = await client.start_conversation(f"long-{uuid.uuid4().hex[:6]}")
        reason = await _refused(client.send_message(cid, "hello", message_id="m" * 1100), "invalid")
        assert reason == "the message id is 1100 bytes; the limit is 996 bytes"
        reason = await _refused(client.start_conversation("c" * 1100), "invalid")
        assert reason == "the conversation id is 1100 characters; a conversation is started with one of at most 128"
        assert "c" * 50 not in reason  # sizes, not the id
        # one character over the bound: refused before anything starts (no run to find)
        reason = await _refused(client.start_conversation("d" * 129), "invalid")
        assert reason == "the conversation id is 129 characters; a conversation is started with one of at most 128"
        await _refused(client.state("d" * 129), "not_found")
        # a message to an id too long for Temporal (never started: refused as it always was)
        reason = await _refused(client.send_message("c" * 1100, "hello"), "invalid")
        assert reason == "the conversation id is 1100 bytes; the limit is 992 bytes"
        await _refused(client.refund(""), "not_found")
        await _refused(client.refund("r" * 1200), "not_found")
        await _refused(client.decide_approval(f"support-{'x' * 1000}~{'0' * 12}", "approve", "sup-1"), "not_found")
        # a message id that fits is served as before
        assert (await client.send_message(cid, "hello", message_id="m" * 996)).turn == 1


async def test_a_long_conversation_ids_approval_can_be_decided(temporal_env, settings):
    async with running_worker(temporal_env, settings, approvals=ApprovalPolicy()) as (client, backend):
        cid = await client.start_conversation(f"{uuid.uuid4().hex}-{'l' * 95}")  # 128, the longest taken
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        shown = await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        assert shown.awaiting_confirmation
        told = await client.send_message(cid, "yes")
        assert told.awaiting_approval
        decided = await client.decide_approval(told.awaiting_approval, "approve", "sup-" + "a" * 120)
        assert decided.status is ApprovalStatus.APPROVED
        again = await client.decide_approval(told.awaiting_approval, "approve", "sup-" + "a" * 120)
        assert again == decided  # the same decision again: the same update id, the first answer
        await until(lambda: _cancelled(backend), "the approved write")
        assert len(backend.ledger_entries("main")) == 1


async def _cancelled(backend) -> bool:
    return order_details(backend, PENDING)["status"] == "cancelled"
