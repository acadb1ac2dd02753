"""A conversation's event ids across a reset and across continue-as-new, on a real Temporal dev
server with a real worker and the journal on SQLite.

An operator resets a conversation to the workflow task that accepted the user's "yes" (as the
Web UI's "Reset" does, nothing re-applied) and the user says yes again: every event recorded
before keeps its id, sequence and time (events are never taken back); the facts re-done past the
reset point (the write's outcome, the reply) are new events with new ids, numbered on from the
last without gaps; the run keeps the reset's epoch in its state. The run then continues as new:
the epoch travels with the state, the new run's start is no new ``conversation.started``, and the
next reply continues the sequence. A conversation that only continued as new keeps one id per fact.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Optional

from activities.store.journal import JournalStore
from tests.policy_fixtures import EMAIL, PENDING
from tests.resets import message_points, reset_to, wait_for_turn
from tests.workflow_harness import NO_APPROVALS, conversation_over_runs, running_worker
from workflows.conversation.workflow import SupportWorkflow
from workflows.domain.contracts import SupportInput


def cancel_brain(view: dict, plan: Optional[dict] = None) -> dict:
    if view["customer"] is None:
        return {"kind": "tool_call", "tool": {"name": "find_user_id_by_email", "arguments": {"email": EMAIL}}}
    if view["turn"] < 2:
        return {"kind": "reply", "text": "How can I help?"}
    if PENDING not in view["orders"]:
        return {"kind": "tool_call", "tool": {"name": "get_order_details", "arguments": {"order_id": PENDING}}}
    if view["turn"] == 2:
        return {"kind": "tool_call", "tool": {"name": "cancel_pending_order",
                                              "arguments": {"order_id": PENDING, "reason": "no longer needed"}}}
    return {"kind": "reply", "text": "Done."}


async def settled_events(journal: JournalStore, cid: str, at_least: int) -> list:
    """The conversation's events once at least ``at_least`` are in and no more arrive for a moment
    (records are written in the background, after the reply)."""
    found: list = []
    for _ in range(200):
        now = await asyncio.to_thread(journal.events, cid)
        if len(now) >= at_least and now == found:
            return now
        found = now
        await asyncio.sleep(0.15)
    raise AssertionError(f"{len(found)} events of {cid}, expected at least {at_least}")


def check_sequence(events: list) -> None:
    assert [e.sequence for e in events] == list(range(1, len(events) + 1)), "numbered from 1 without gaps"
    assert len({e.id for e in events}) == len(events), "one id per event"


async def test_events_past_a_reset_point_get_new_ids_and_continue_the_sequence(temporal_env, settings):
    journal = JournalStore(settings.resolved_journal_url())
    async with running_worker(temporal_env, settings, brain=cancel_brain) as (client, backend):
        cid = f"reset-events-{uuid.uuid4().hex[:6]}"
        await temporal_env.client.start_workflow(
            SupportWorkflow.run, SupportInput(conversation_id=cid, max_turns_per_run=4, approvals=NO_APPROVALS),
            id=f"support-{cid}", task_queue=settings.task_queue)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert (await client.send_message(cid, f"cancel {PENDING} please")).awaiting_confirmation
        await client.send_message(cid, "yes")
        point = (await message_points(temporal_env, f"support-{cid}"))[-1]  # the yes's: wipes it, keeps the proposal
        before = await settled_events(journal, cid, 6)
        check_sequence(before)
        assert [e.type for e in before].count("operation.applied") == 1
        assert (await client.state(cid)).reset_epoch is None

        await reset_to(temporal_env, f"support-{cid}", point)
        await wait_for_turn(client, cid, 2)
        await client.send_message(cid, "yes")  # re-done past the reset point: the ledger's recorded result
        after = await settled_events(journal, cid, len(before) + 2)
        epoch = (await client.state(cid)).reset_epoch

        check_sequence(after)
        assert after[:len(before)] == before  # ids, sequences and times of everything recorded before
        new = after[len(before):]
        assert {e.id for e in new}.isdisjoint({e.id for e in before})
        assert [e.type for e in new] == ["operation.applied", "conversation.replied"], [e.type for e in new]
        assert new[0].data == next(e.data for e in before if e.type == "operation.applied")  # the same fact, anew
        assert epoch is not None and len(epoch) == 8
        assert backend.duplicate_writes("main") == 0

        # the run's fourth turn continues it as new, the epoch with its state
        handle = temporal_env.client.get_workflow_handle(f"support-{cid}")
        reset_run = (await handle.describe()).run_id
        await client.send_message(cid, "thanks")
        for _ in range(100):
            if (await handle.describe()).run_id != reset_run:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("no continue-as-new after the reset; the test would prove nothing")
        await client.send_message(cid, "and thanks again")
        later = await settled_events(journal, cid, len(after) + 2)
        assert (await client.state(cid)).reset_epoch == epoch
    check_sequence(later)
    assert later[:len(after)] == after
    assert [e.type for e in later[len(after):]] == ["conversation.replied"] * 2
    assert [e.type for e in later].count("conversation.started") == 1


async def test_a_conversation_continued_as_new_keeps_one_id_per_fact(temporal_env, settings):
    journal = JournalStore(settings.resolved_journal_url())
    async with running_worker(temporal_env, settings, brain=None) as (client, _):
        cid = await conversation_over_runs(temporal_env.client, settings, client, "can-events")
        events = await settled_events(journal, cid, 3)
        assert (await client.state(cid)).reset_epoch is None
    check_sequence(events)
    assert [e.type for e in events].count("conversation.started") == 1
    replies = [(e.data["turn"], e.data["entry"]) for e in events if e.type == "conversation.replied"]
    assert len(replies) == len(set(replies)) == 2
