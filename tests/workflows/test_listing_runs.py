"""Lists name each conversation once, with the status it has now: the runs a conversation
continued as new from are not listed (they showed it again, "active", once per run), and a
run that closed without setting its final ``Status`` (failed, terminated) is not listed as
``active``/``running``. (Adversarial review.)"""

from __future__ import annotations

import asyncio
import uuid

from tests.policy_fixtures import CUSTOMER, DELIVERED, EMAIL, PENDING
from tests.workflow_harness import ListBrain, call, reply, running_worker
from workflows.contracts import SupportInput
from workflows.support import SupportWorkflow


async def _listed(client, cid: str, **filters) -> list:
    page = await client.list_conversations(order_id=DELIVERED, limit=100, **filters)
    return [item for item in page.items if item.conversation_id == cid]


async def _statuses(client, cid: str, **filters) -> list:
    return [(i.status, i.step) for i in await _listed(client, cid, **filters)]


async def _settled(read, expected, seconds: float = 10.0):
    """``read()`` once it answers ``expected``, or its last answer after ``seconds``."""
    for _ in range(int(seconds / 0.1)):
        found = await read()
        if found == expected:
            return found
        await asyncio.sleep(0.1)
    return found


async def test_a_conversation_that_continued_as_new_is_listed_once_and_a_terminated_one_not_as_active(
        temporal_env, settings):
    brain = ListBrain([call("find_user_id_by_email", email=EMAIL), call("get_user_details", user_id=CUSTOMER),
                       call("get_order_details", order_id=DELIVERED), reply("Found it."),
                       call("get_order_details", order_id=PENDING), reply("Found that one too.")])
    async with running_worker(temporal_env, settings, brain=brain) as (client, _):
        cid = f"list-can-{uuid.uuid4().hex[:6]}"
        await temporal_env.client.start_workflow(
            SupportWorkflow.run, SupportInput(conversation_id=cid, max_turns_per_run=1), id=f"support-{cid}",
            task_queue=settings.task_queue)
        await client.send_message(cid, f"Hi, my email is {EMAIL}; where is {DELIVERED}?")
        await client.send_message(cid, f"and {PENDING}?")
        runs = {w.run_id async for w in temporal_env.client.list_workflows(f"WorkflowId = 'support-{cid}'")}
        assert len(runs) >= 2, "no continue-as-new happened; the test would prove nothing"
        # visibility is eventually consistent: what a list shows once every run is indexed
        assert await _settled(lambda: _statuses(client, cid), [("active", "active")]) == [("active", "active")]
        assert await _settled(lambda: _statuses(client, cid, status="active"), [("active", "active")]) == [
            ("active", "active")]
        await temporal_env.client.get_workflow_handle(f"support-{cid}").terminate("an operator stopped it")
        assert await _settled(lambda: _statuses(client, cid), [("terminated", "active")]) == [("terminated", "active")]
        assert await _settled(lambda: _statuses(client, cid, status="active"), []) == []
