"""A cancel with ``rollback`` that arrives while a transfer to a human agent opens its ticket:
the conversation ends transferred (the ticket is open), and the cancel is not lost: its
rollback undoes the reversible writes and its summary is told."""

from __future__ import annotations

import asyncio
import threading
import uuid

from activities.retail_port import RetailPort
from tests.policy_fixtures import CUSTOMER, EMAIL
from tests.workflow_harness import Script, call, reply, running_worker, until, user_details
from workflows.domain import replies
from workflows.domain.contracts import CancelRequest
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id

NEW_ADDRESS = dict(address1="1 New Street", address2="", city="Austin", state="TX", country="USA", zip="78701")


async def test_a_rollback_cancel_during_a_transfer_is_not_lost(temporal_env, settings, monkeypatch):
    opening, release = threading.Event(), threading.Event()
    original = RetailPort.open_ticket

    def slow_open(self, *args, **kwargs):
        opening.set()
        release.wait(20)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(RetailPort, "open_ticket", slow_open)
    script = Script([call("find_user_id_by_email", email=EMAIL), reply("Hello Raj, how can I help?"),
                     call("get_user_details", user_id=CUSTOMER),
                     call("modify_user_address", user_id=CUSTOMER, **NEW_ADDRESS), reply("Your address is changed."),
                     {"kind": "transfer_to_human", "summary": "the customer wants a person"}])
    async with running_worker(temporal_env, settings, brain=script) as (client, backend):
        before = user_details(backend, CUSTOMER)["address"]
        cid = await client.start_conversation(f"xfer-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert (await client.send_message(cid, "Change my address to 1 New Street, Austin")).awaiting_confirmation
        await client.send_message(cid, "yes")
        message = asyncio.ensure_future(client.send_message(cid, "Let me talk to a person"))
        await until(opening.is_set, "the transfer's ticket")
        await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).signal(
            SupportWorkflow.cancel, CancelRequest(reason="the customer hung up", rollback=True))
        await asyncio.sleep(1.0)
        release.set()
        answer = await asyncio.wait_for(message, 30)
        outcome = await asyncio.wait_for(client.outcome(cid), 30)
        assert outcome.status == "transferred" and len(backend.tickets("main")) == 1  # the ticket was opened
        assert answer.text.startswith("The conversation was cancelled. Undone: "), answer.text
        assert answer.text.endswith(replies.TRANSFERRED), answer.text
        assert outcome.state.ended_reason == "transferred to a human agent; cancel requested meanwhile: " \
                                            "the customer hung up"
        assert user_details(backend, CUSTOMER)["address"] == before, answer.text
        assert outcome.state.recent_turns[-1].text == answer.text
