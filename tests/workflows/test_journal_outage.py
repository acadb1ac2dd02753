"""A journal that is down or out of order never holds a conversation up, and a reset
leaves only the conversation that happened in it: the next message is answered promptly
while ``record_turn`` fails, a worker starts with the journal's database unreachable, and
after a reset the transcript holds only the new timeline's turns. (From a review.)"""

from __future__ import annotations

import asyncio
import time
import uuid

import sqlalchemy.exc

from activities.store.journal import JournalStore
from tests.policy_fixtures import EMAIL
from tests.workflow_harness import running_worker


class DownJournal(JournalStore):
    """Writing a turn's record always fails as a database that does not answer (``record_turn``,
    and a reply's ``record_model_call`` with the turn)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.attempts = 0

    def _record_turn(self, conn, record):
        self.attempts += 1
        raise sqlalchemy.exc.OperationalError("INSERT ...", {}, Exception("connection refused"))


async def test_the_next_message_is_answered_promptly_while_the_journal_is_down(temporal_env, settings):
    journal = DownJournal(settings.resolved_journal_url())
    async with running_worker(temporal_env, settings, journal=journal) as (client, _):
        cid = await client.start_conversation(f"journal-down-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        started = time.monotonic()
        await client.send_message(cid, "What are my orders?")
        waited = time.monotonic() - started
    assert journal.attempts >= 1
    assert waited < 10, f"the second message waited {waited:.1f} s for the journal"


DEAD_JOURNAL = "postgresql+psycopg://postgres@127.0.0.1:9/journal"  # discard port: nothing listens


async def test_a_worker_starts_while_the_journal_is_unreachable(temporal_env, settings):
    """``build_worker`` opens ``JournalStore``, whose constructor creates the schema at once:
    with the journal's database unreachable at a (re)start the worker does not start, and
    every conversation stops, although the journal is only an audit record."""
    from starter.runtime.worker import build_worker
    down = settings.model_copy(update={"journal_url": DEAD_JOURNAL})
    try:
        build_worker(temporal_env.client, down)
    except Exception as err:  # noqa: BLE001
        raise AssertionError(f"no worker while the journal is down: {type(err).__name__}") from None


async def test_after_a_reset_the_transcript_holds_only_the_conversation_that_happened(temporal_env, settings):
    """An operator resets the conversation to just after turn 1 (messages not re-applied);
    the user then says something else. The journal still holds the discarded turns 2 and 3
    of the old timeline (only the re-run turn is trimmed), so the transcript shows messages
    the conversation's state no longer has, mixed with the new ones."""
    from tests.resets import message_points, reset_to, wait_for_turn
    from tests.workflow_harness import until
    from workflows.conversation.workflow import support_workflow_id
    async with running_worker(temporal_env, settings) as (client, _):
        cid = await client.start_conversation(f"journal-reset-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        wid = support_workflow_id(cid)
        journal = JournalStore(settings.resolved_journal_url())
        await until(lambda: len(journal.transcript(cid)) == 2, "turn 1 recorded")
        await client.send_message(cid, "What is the status of order #W4566809?")
        await client.send_message(cid, "And my other orders?")
        after_turn_1 = (await message_points(temporal_env, wid))[-2]  # turn 2's: keeps turn 1
        await until(lambda: len(journal.transcript(cid)) == 6, "turns 2 and 3 recorded")
        await reset_to(temporal_env, wid, after_turn_1)
        await wait_for_turn(client, cid, 1)
        await client.send_message(cid, "Thanks, that's all")
        state = await client.state(cid)
        await asyncio.sleep(2)
    users = [e.text for e in journal.transcript(cid) if e.role == "user"]
    journal.close()
    assert users == [t.text for t in state.recent_turns if t.role.value == "user"], users
