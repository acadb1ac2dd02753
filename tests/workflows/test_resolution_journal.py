"""What an operator's resolution tells the user is in the transcript at once, not only with the
record of the user's next turn: ``statekeeper transcript`` and
``GET /conversations/{id}/transcript`` show it even when the user writes nothing more. Real
Temporal dev server, worker and journal (SQLite); the write fails as ``OutcomeUnknown`` at the
tool port."""

from __future__ import annotations

import asyncio
import time

from activities.store.journal import JournalStore
from tests.e2e.test_operator_resolution import _brain, _escalated
from tests.faults import UnknownWrites
from tests.workflow_harness import running_worker


async def _transcript_with(journal: JournalStore, cid: str, words: str, timeout_seconds: float = 20.0) -> list:
    deadline = time.monotonic() + timeout_seconds
    while True:
        entries = await asyncio.to_thread(journal.transcript, cid)
        if any(words in e.text for e in entries) or time.monotonic() > deadline:
            return entries
        await asyncio.sleep(0.2)


async def test_what_a_resolution_told_the_user_is_in_the_transcript_before_their_next_message(temporal_env, settings):
    journal = JournalStore(settings.resolved_journal_url())
    async with running_worker(temporal_env, settings, brain=_brain(), wrap_port=UnknownWrites) as (client, _):
        cid, step_id = await _escalated(client, "resolution-journal")
        record = await client.resolve_outcome(cid, step_id, "not_applied", "op-3", "no such change in the order system")
        assert "did not go through" in record.told

        entries = await _transcript_with(journal, cid, record.told)
        told = [e for e in entries if e.text == record.told]
        assert len(told) == 1, [(e.turn, e.kind, e.text[:60]) for e in entries]
        assert told[0].role == "assistant" and told[0].kind == "notice"
        assert entries[-1].text == record.told  # the last thing the user was told, after the escalation

        reply = await client.send_message(cid, "thanks, anything else?")
        assert reply.text.startswith(record.told)  # the next reply still opens with it
        entries = await _transcript_with(journal, cid, "thanks, anything else?")
        assert [e.text for e in entries].count(record.told) == 1  # recorded once, kept by the next turn's record
        assert [e.text for e in entries][-3:] == [record.told, "thanks, anything else?", "ok"]
