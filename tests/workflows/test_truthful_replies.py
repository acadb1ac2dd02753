"""Replies tell the truth about the shown write when messages come back to back: a message that
moves on from it without a yes or a no opens its reply with "I have not made the change …",
even when a newer message then supersedes the reply; a yes that ran the write is told as done
although more messages wait behind it.

SupportWorkflow on a real Temporal dev server, a real worker and the retail system of record;
the model is a test brain that takes its time, so the next message arrives while it thinks.
"""

from __future__ import annotations

import asyncio
import uuid

from tests.policy_fixtures import CUSTOMER, DELIVERED, EMAIL, PENDING
from tests.workflow_harness import Script, Think, call, order_details, reply, running_worker
from workflows.domain import replies

READS = [call("find_user_id_by_email", email=EMAIL), call("get_user_details", user_id=CUSTOMER),
         call("get_order_details", order_id=PENDING),
         call("cancel_pending_order", order_id=PENDING, reason="no longer needed")]


async def _back_to_back(client, cid: str, *texts: str) -> list:
    """Send ``texts`` one right after the other (each accepted before the next is sent)."""
    sent = []
    for text in texts:
        sent.append(asyncio.ensure_future(client.send_message(cid, text)))
        await asyncio.sleep(0.3)
    return await asyncio.wait_for(asyncio.gather(*sent), 60)


async def test_a_message_that_moves_on_from_the_shown_write_says_it_was_not_made(temporal_env, settings):
    script = Script([*READS, Think(2.0, reply(f"Order {DELIVERED} was delivered.")), reply("How can I help?")])
    async with running_worker(temporal_env, settings, brain=script) as (client, backend):
        cid = await client.start_conversation(f"moved-on-{uuid.uuid4().hex[:6]}")
        shown = await client.send_message(cid, f"my email is {EMAIL}; cancel {PENDING}, I no longer need it")
        detail = shown.awaiting_confirmation
        assert detail
        moved, answer = await _back_to_back(client, cid, f"Actually, what is the status of {DELIVERED}?", "yes")
        assert moved.text.startswith(replies.not_made(detail)), moved.text
        assert moved.text == f"{replies.not_made(detail)} {replies.SUPERSEDED}"
        assert answer.awaiting_confirmation is None and "done" not in answer.text.lower()
        assert order_details(backend, PENDING)["status"] == "pending"  # the late yes confirmed nothing
        assert (await client.state(cid)).completed_operations == []


async def test_yes_no_yes_back_to_back_tells_the_write_that_ran(temporal_env, settings):
    script = Script([*READS, Think(1.5, reply("Understood.")), reply("Anything else?")])
    async with running_worker(temporal_env, settings, brain=script) as (client, backend):
        cid = await client.start_conversation(f"yes-no-yes-{uuid.uuid4().hex[:6]}")
        shown = await client.send_message(cid, f"my email is {EMAIL}; cancel {PENDING}, I no longer need it")
        detail = shown.awaiting_confirmation
        first, second, third = await _back_to_back(client, cid, "yes", "no", "yes")
        assert first.text.startswith(f"Your request is done: {detail}"), first.text
        assert order_details(backend, PENDING)["status"] == "cancelled"
        state = await client.state(cid)
        assert len(state.completed_operations) == 1 and state.completed_operations[0].ok
        for later in (second, third):  # nothing else was shown, so nothing else is said to be done or not
            assert "done" not in later.text.lower() and "not made" not in later.text
