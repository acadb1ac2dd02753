"""Resuming a saved state: an unusable one is refused as ``state_incompatible`` at once
(never a workflow task failing over and over), and a state resumed under a new conversation
id is that conversation's: its journal and keys use the new id."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.api.enums.v1 import EventType

from activities.store.journal import JournalStore
from starter.client.errors import ConversationError
from tests.workflows.test_state_versions import v1_state
from tests.workflow_harness import ListBrain, reply, running_worker
from workflows.conversation.workflow import support_workflow_id


async def test_a_state_with_a_negative_turn_is_refused_not_a_stuck_workflow_task(temporal_env, settings):
    """`turn` -5 loads (ConversationState has no bound) but the next ModelRequest(turn>=0)
    raises a pydantic ValidationError inside the workflow: the task fails and retries forever
    while the user's message waits. It should be refused as state_incompatible at load."""
    brain = ListBrain([reply("hello")])
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = f"neg-turn-{uuid.uuid4().hex[:6]}"
        saved = v1_state(cid)
        saved["turn"] = -5
        try:
            await asyncio.wait_for(client.start_conversation(cid, state=saved), 20)
            with pytest.raises(ConversationError) as err:
                await asyncio.wait_for(client.send_message(cid, "hi"), 20)
            assert err.value.kind == "state_incompatible", (err.value.kind, str(err.value))
        except ConversationError as err:
            assert err.kind == "state_incompatible"
        handle = temporal_env.client.get_workflow_handle(support_workflow_id(cid))
        events = [e.event_type async for e in handle.fetch_history_events()]
        assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in events


async def test_a_resumed_state_is_journaled_under_the_new_conversation_id(temporal_env, settings):
    """A finished conversation's id cannot be reused (REJECT_DUPLICATE), so resuming its saved
    state means a new id; the run keeps the saved `conversation_id`, and the journal (and the
    operation ids / idempotency keys) use the old one: the new conversation's transcript is
    written into the old conversation's, and the new id has none."""
    brain = ListBrain([reply("Your orders are as you saw them.")])
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        old, new = f"old-{uuid.uuid4().hex[:6]}", f"new-{uuid.uuid4().hex[:6]}"
        await client.start_conversation(new, state=v1_state(old))
        await client.send_message(new, "How are my orders?")
        state = await client.state(new)
    journal = JournalStore(settings.resolved_journal_url())
    for _ in range(50):
        if journal.transcript(old) or journal.transcript(new):
            break
        await asyncio.sleep(0.2)
    try:
        assert journal.transcript(old) == [], 'the new conversation was journaled under the saved id'
        assert state.conversation_id == new, state.conversation_id
        assert [e.text for e in journal.transcript(new)][:1] == ["How are my orders?"]
    finally:
        journal.close()
