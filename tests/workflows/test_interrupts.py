"""Interrupts: a message that arrives while the model is thinking is neither lost nor
reordered, and a proposal made for the older message is discarded (docs/concepts.md, "Interrupts and cancellation":
reads still run; a reply, a write to confirm, an end or a transfer are dropped, and the
newer message is answered from the whole state).

SupportWorkflow on a real Temporal dev server and a real worker; the model is faked at
its boundary by a brain that takes its time.
"""

from __future__ import annotations

import asyncio
import uuid

from tests.policy_fixtures import EMAIL, PENDING
from tests.workflow_harness import Script, Think, call, reply, running_worker, until
from workflows.domain.policy.clauses import Rule
from workflows.domain.replies import SUPERSEDED
from workflows.domain.state import Role


async def test_a_newer_message_supersedes_the_proposal_in_flight(temporal_env, settings):
    script = Script([call("find_user_id_by_email", email=EMAIL), reply("Hello Raj, how can I help?"),
                     Think(2.0, call("get_order_details", order_id=PENDING)),
                     call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake"),
                     reply("Your order is still pending; nothing was changed.")])
    async with running_worker(temporal_env, settings, brain=script) as (client, backend):
        cid = await client.start_conversation(f"interrupt-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        older = asyncio.ensure_future(client.send_message(cid, f"Cancel {PENDING}, I ordered it by mistake"))
        await until(lambda: (script.calls == 3), "the model thinking about the older message")
        newer = asyncio.ensure_future(client.send_message(cid, "Wait, don't cancel anything, just tell me its status"))
        first, second = await asyncio.wait_for(asyncio.gather(older, newer), 20)
        assert first.text == SUPERSEDED and first.awaiting_confirmation is None
        assert second.text == "Your order is still pending; nothing was changed."
        state = await client.state(cid)
        assert state.pending_confirmation is None and backend.ledger_entries("main") == []
        assert PENDING in state.orders  # the read proposed for the older message still ran
        [superseded] = [r for r in state.rejections if r.rule == Rule.SUPERSEDED.value]
        assert superseded.proposal["tool"]["name"] == "cancel_pending_order"
        users = [t.text for t in state.recent_turns if t.role == Role.USER]
        assert users[-2:] == [f"Cancel {PENDING}, I ordered it by mistake",
                              "Wait, don't cancel anything, just tell me its status"]
        assert [t.role for t in state.recent_turns[-4:]] == [Role.USER, Role.ASSISTANT, Role.USER, Role.ASSISTANT]
