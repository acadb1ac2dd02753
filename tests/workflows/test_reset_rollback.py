"""A reset that re-runs a rollback whose compensation already applied: the change is still
reported undone, not "could not be undone".

Before the compensating write, the rollback reads the subject's document and undoes only
what the write set (a later change by someone else is never overwritten). After an operator
reset the cancelled conversation to the workflow task that started its rollback, that read
found the address already restored (by the first run's compensation) and the rollback told
the user the change was not undone, kept the step ``done`` and asked a human to restore an
address that was restored. The compensation's key comes from business identity, so the
ledger knows it applied.

SupportWorkflow on a real Temporal dev server, a real worker and SQLite; the model is a
scripted brain.
"""

from __future__ import annotations

import asyncio
import uuid

from temporalio.api.enums.v1 import EventType

from tests.policy_fixtures import CUSTOMER, EMAIL
from tests.resets import completed_before, reset_to
from tests.workflow_harness import Script, call, reply, running_worker, user_details
from workflows.domain.contracts import CancelRequest
from workflows.domain.state import StepStatus
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id

NEW_ADDRESS = dict(address1="1 New Street", address2="", city="Austin", state="TX", country="USA", zip="78701")


def _signalled_then_read(seen: dict):
    """Marks the first activity scheduled after the cancel signal (the rollback's read)."""
    def marks(event) -> bool:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            seen["signal"] = True
        return bool(seen) and event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    return marks


async def test_a_reset_that_re_runs_an_applied_rollback_reports_the_change_undone(temporal_env, settings):
    script = Script([call("find_user_id_by_email", email=EMAIL), reply("Hello Raj, how can I help?"),
                     call("get_user_details", user_id=CUSTOMER),
                     call("modify_user_address", user_id=CUSTOMER, **NEW_ADDRESS), reply("Your address is changed.")])
    async with running_worker(temporal_env, settings, brain=script) as (client, backend):
        before = user_details(backend, CUSTOMER)["address"]
        cid = await client.start_conversation(f"reset-undo-{uuid.uuid4().hex[:6]}")
        workflow_id = support_workflow_id(cid)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert (await client.send_message(cid, "Change my address to 1 New Street, Austin")).awaiting_confirmation
        await client.send_message(cid, "yes")
        await temporal_env.client.get_workflow_handle(workflow_id).signal(
            SupportWorkflow.cancel, CancelRequest(reason="the customer changed their mind", rollback=True))
        first = await asyncio.wait_for(client.outcome(cid), 60)
        assert first.state.steps[0].status == StepStatus.COMPENSATED  # the first run undid it
        assert user_details(backend, CUSTOMER)["address"] == before

        point = await completed_before(temporal_env, workflow_id, _signalled_then_read({}), "rollback read")
        await reset_to(temporal_env, workflow_id, point)
        outcome = await asyncio.wait_for(client.outcome(cid), 60)
    assert user_details(backend, CUSTOMER)["address"] == before
    summary = outcome.state.recent_turns[-1].text
    [step] = outcome.state.steps
    assert "Undone: " in summary and "could not be undone" not in summary, summary
    assert step.status == StepStatus.COMPENSATED
    assert backend.tickets("main") == []  # nothing for a human to restore
    assert backend.duplicate_writes("main") == 0
