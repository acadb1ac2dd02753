"""Lists name each conversation once, with the status it has now: the runs a conversation
continued as new from are not listed (which would show it again, "active", once per run), and
a run that closed without setting its final ``ProcessStatus`` (failed, terminated) is not listed as
``active``/``running``: it is listed, found by ``?status=`` and read as ``terminated``."""

from __future__ import annotations

import asyncio

from tests.policy_fixtures import DELIVERED
from tests.workflow_harness import conversation_over_runs, running_worker, two_orders_brain


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


async def test_a_conversation_that_continued_as_new_is_listed_once_and_a_terminated_one_as_terminated(
        temporal_env, settings):
    async with running_worker(temporal_env, settings, brain=two_orders_brain()) as (client, _):
        cid = await conversation_over_runs(temporal_env.client, settings, client, "list-can")
        # visibility is eventually consistent: what a list shows once every run is indexed
        assert await _settled(lambda: _statuses(client, cid), [("active", "active")]) == [("active", "active")]
        assert await _settled(lambda: _statuses(client, cid, status="active"), [("active", "active")]) == [
            ("active", "active")]
        before = await client.state(cid)
        assert before.status.value == "active"
        await temporal_env.client.get_workflow_handle(f"support-{cid}").terminate("an operator stopped it")
        assert await _settled(lambda: _statuses(client, cid), [("terminated", "active")]) == [("terminated", "active")]
        assert await _settled(lambda: _statuses(client, cid, status="active"), []) == []
        # the word an item shows finds it, and the state says the same (its turns intact)
        assert await _settled(lambda: _statuses(client, cid, status="terminated"), [("terminated", "active")]) == [
            ("terminated", "active")]
        state = await client.state(cid)
        # ... and its phase, which the run left open, is closed: the run is over
        assert state.phase.value == "closed" and before.phase.value == "open"
        assert state.status.value == "terminated" and state.turn and state.model_dump(
            exclude={"status", "phase"}) == before.model_dump(exclude={"status", "phase"})
