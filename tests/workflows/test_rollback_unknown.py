"""A rollback whose compensating write committed but whose answer was lost on every
attempt (the system of record went away right after the commit and stayed away for the
retries): the compensation's outcome was unknown, not "could not be undone". Before
anyone is told, the ledger is asked by the compensation's key (as for any write whose
outcome is unknown); the change it shows undone is reported undone.

SupportWorkflow on a real Temporal dev server, a real worker and SQLite; the model is a
scripted brain; faults are injected at the tool port (``tests.port_faults``).
"""

from __future__ import annotations

import asyncio
import uuid

from tests.policy_fixtures import CUSTOMER, EMAIL
from tests.port_faults import FaultyPort
from tests.workflow_harness import Script, call, reply, running_worker, user_details
from workflows.domain.contracts import CancelRequest
from workflows.domain.state import StepStatus
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id

NEW_ADDRESS = dict(address1="1 New Street", address2="", city="Austin", state="TX", country="USA", zip="78701")


async def test_a_compensation_whose_answer_was_lost_is_reported_as_it_is_in_the_ledger(temporal_env, settings):
    script = Script([call("find_user_id_by_email", email=EMAIL), reply("Hello Raj, how can I help?"),
                     call("get_user_details", user_id=CUSTOMER),
                     call("modify_user_address", user_id=CUSTOMER, **NEW_ADDRESS), reply("Your address is changed.")])
    port = FaultyPort()
    async with running_worker(temporal_env, settings, brain=script, wrap_port=port.attach) as (client, backend):
        before = user_details(backend, CUSTOMER)["address"]
        cid = await client.start_conversation(f"undo-lost-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert (await client.send_message(cid, "Change my address to 1 New Street, Austin")).awaiting_confirmation
        await client.send_message(cid, "yes")
        assert user_details(backend, CUSTOMER)["address"]["address1"] == "1 New Street"
        # the compensation commits, its answer is lost, and every retry finds the system away
        port.arm("modify_user_address", "commit_then_drop")
        port.arm("modify_user_address", "http_5xx", 4)
        await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).signal(
            SupportWorkflow.cancel, CancelRequest(reason="the customer changed their mind", rollback=True))
        outcome = await asyncio.wait_for(client.outcome(cid), 60)
        assert len(port.hits) == 5
        assert user_details(backend, CUSTOMER)["address"] == before  # the change was undone
        summary = outcome.state.recent_turns[-1].text
        [step] = outcome.state.steps
        assert "Undone: " in summary and "could not be undone" not in summary, summary
        assert step.status == StepStatus.COMPENSATED
        assert backend.tickets("main") == []  # nothing for a human to restore
