"""A cancel that arrives while a confirmed write that needs a supervisor is being parked (the
ledger is asked first, an activity): the reply to the user's yes is the cancellation summary,
not "it awaits a supervisor's approval" for a write the cancel has just withdrawn."""

from __future__ import annotations

import asyncio
import threading
import uuid

from activities.retail_port import RetailPort
from tests.policy_fixtures import EMAIL, PENDING
from tests.workflow_harness import Script, call, reply, running_worker, until
from workflows.domain.policy.approvals import ApprovalPolicy, ApprovalStatus
from workflows.domain.contracts import CancelRequest
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id


async def test_a_cancel_while_a_write_is_parked_for_approval_answers_the_yes_with_the_summary(
        temporal_env, settings, monkeypatch):
    asking, release = threading.Event(), threading.Event()
    original = RetailPort.recorded

    def slow_recorded(self, *args, **kwargs):
        asking.set()
        release.wait(20)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(RetailPort, "recorded", slow_recorded)
    script = Script([call("find_user_id_by_email", email=EMAIL), reply("Hello Raj, how can I help?"),
                     call("get_order_details", order_id=PENDING),
                     call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake")])
    async with running_worker(temporal_env, settings, brain=script, approvals=ApprovalPolicy()) as (client, backend):
        cid = await client.start_conversation(f"park-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert (await client.send_message(cid, f"Cancel {PENDING}, I ordered it by mistake")).awaiting_confirmation
        yes = asyncio.ensure_future(client.send_message(cid, "yes"))
        await until(asking.is_set, "the ledger look-up before parking the write")
        await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).signal(
            SupportWorkflow.cancel, CancelRequest(reason="the customer hung up"))
        await asyncio.sleep(1.0)
        release.set()
        answer = await asyncio.wait_for(yes, 30)
        outcome = await asyncio.wait_for(client.outcome(cid), 30)
        assert outcome.status == "cancelled"
        assert [a.status for a in outcome.state.approvals] in ([], [ApprovalStatus.WITHDRAWN])
        assert answer.status == "cancelled" and answer.awaiting_approval is None, answer
        assert answer.text.startswith("The conversation was cancelled.") and "Not done: " in answer.text, answer.text
        assert backend.ledger_entries("main") == []
