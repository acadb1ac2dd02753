"""Memory across conversations on a real Temporal dev server, with a real worker (its memory
port on the memory store of the test's SQLite journal), the retail system of record on SQLite
and the offline stand-in model (no test brain: its rules decide):

- conversation 1 authenticates, the customer asks that refunds go to their gift card and
  confirms: the fact is kept with its source (conversation, turn, the user's words) and
  ``memory.remembered`` is recorded without the value;
- conversation 2 (new id, same customer) reads it after authentication and proposes the gift
  card for a return the customer never said where to refund; the user confirms and the return
  applies with that payment method; "what do you remember about me?" is answered from the read;
  "my preferred refund method is now my credit card" is confirmed and replaces it;
- conversation 3 proposes the credit card for the same kind of return;
- "forget everything" twice applies twice, the second time saying nothing was remembered;
  both are ``memory.forgotten`` events, and nothing is kept;
- with memory turned off (``Settings.memory_enabled``: the worker has no memory port and
  conversations start with ``SupportInput.memory`` off), nothing is read, the model calls use the
  prompt without the memory tools (the decision log says which), and "please remember ..." is
  answered that nothing is kept; a worker without a memory port under a conversation started with
  memory on reads nothing and refuses the write;
- when the memory's database does not answer, the read's retries run out and the conversation
  goes on without it (the customer is served, nothing is said to be unavailable).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime, timezone

from activities.store.journal import JournalStore
from activities.store.memory import MemoryStore
from tests.workflow_harness import order_details, running_worker, until
from workflows.domain.memory import FactKind
from workflows.domain.prompt import PROMPT_VERSION_WITHOUT_MEMORY
from workflows.domain.pseudonym import customer_pseudonym

CUSTOMER = "chen_silva_7485"
EMAIL = "chen.silva2698@example.com"
GIFT_CARD = "gift_card_7250692"
CREDIT_CARD = "credit_card_1565124"
PAID_BY_CARD = ("#W3069600", "#W8171054")
"""Delivered orders of the customer paid with the credit card: a return refunds there unless
the customer (or what they asked to be remembered) says otherwise."""


def facts(settings, store: MemoryStore) -> dict[str, str]:
    customer = customer_pseudonym(CUSTOMER, settings.pseudonym_secret())
    return {f.kind.value: f.value for f in store.facts("default", customer, datetime.now(timezone.utc))}


async def signed_in(client, prefix: str) -> str:
    conversation = f"{prefix}-{uuid.uuid4().hex[:6]}"
    await client.start_conversation(conversation)
    said = await client.send_message(conversation, f"Hi, my email is {EMAIL}")
    assert "verified your identity" in said.text, said.text
    return conversation


async def memory_events(journal: JournalStore, conversation: str, count: int) -> list:
    found: list = []

    async def arrived() -> bool:
        nonlocal found
        found = [e for e in await asyncio.to_thread(journal.events, conversation) if e.type.startswith("memory.")]
        return len(found) >= count

    await until(arrived, f"{count} memory events of {conversation}")
    return found


async def test_a_fact_remembered_in_one_conversation_shapes_the_next_and_its_correction_the_one_after(
        temporal_env, settings):
    store = MemoryStore(settings.resolved_journal_url())
    journal = JournalStore(settings.resolved_journal_url())
    async with running_worker(temporal_env, settings, memory=True) as (client, backend):
        first = await signed_in(client, "mem-one")
        asked = await client.send_message(first, "Please remember that refunds go to my gift card")
        assert asked.awaiting_confirmation and GIFT_CARD in asked.awaiting_confirmation, asked
        assert facts(settings, store) == {}  # nothing before the yes
        done = await client.send_message(first, "yes")
        assert "done" in done.text.lower(), done.text
        assert facts(settings, store) == {"refund_method": GIFT_CARD}
        [kept] = store.facts("default", customer_pseudonym(CUSTOMER, settings.pseudonym_secret()),
                             datetime.now(timezone.utc))
        assert (kept.source.conversation_id, kept.source.turn) == (first, 2)
        assert kept.source.words == "Please remember that refunds go to my gift card"
        [event] = await memory_events(journal, first, 1)
        assert (event.type, event.data["kind"]) == ("memory.remembered", FactKind.REFUND_METHOD.value)
        assert GIFT_CARD not in json.dumps(event.data)

        second = await signed_in(client, "mem-two")
        state = await client.state(second)
        assert [(f.kind, f.value, f.conversation, f.contradicted) for f in state.customer.memory] == [
            ("refund_method", GIFT_CARD, first, False)]
        proposed = await client.send_message(second, f"I want to return everything in order {PAID_BY_CARD[0]}")
        assert proposed.awaiting_confirmation and GIFT_CARD in proposed.awaiting_confirmation, proposed
        await client.send_message(second, "yes")
        returned = order_details(backend, PAID_BY_CARD[0])
        assert returned["status"] == "return requested"
        assert returned["return_payment_method_id"] == GIFT_CARD

        told = await client.send_message(second, "What do you remember about me?")
        assert GIFT_CARD in told.text and "Please remember that refunds go to my gift card" in told.text, told.text
        corrected = await client.send_message(second, "My preferred refund method is now my credit card")
        assert corrected.awaiting_confirmation and CREDIT_CARD in corrected.awaiting_confirmation, corrected
        await client.send_message(second, "yes")
        assert facts(settings, store) == {"refund_method": CREDIT_CARD}

        third = await signed_in(client, "mem-three")
        proposed = await client.send_message(third, f"I want to return everything in order {PAID_BY_CARD[1]}")
        assert proposed.awaiting_confirmation and CREDIT_CARD in proposed.awaiting_confirmation, proposed
        assert GIFT_CARD not in proposed.awaiting_confirmation

        await client.send_message(third, "no")
        shown = await client.send_message(third, "Please forget everything")
        assert shown.awaiting_confirmation == "Forget everything remembered about you.", shown
        await client.send_message(third, "yes")
        assert facts(settings, store) == {}
        again = await client.send_message(third, "Please forget everything")
        assert again.awaiting_confirmation and "Nothing of that is remembered now" in again.awaiting_confirmation
        twice = await client.send_message(third, "yes")
        assert "done" in twice.text.lower(), twice.text
        assert facts(settings, store) == {}
        forgotten = await memory_events(journal, third, 2)
        assert [(e.type, e.data["kind"]) for e in forgotten] == [("memory.forgotten", "all")] * 2
    store.dispose()


async def test_with_memory_off_nothing_is_read_offered_or_kept(temporal_env, settings):
    store = MemoryStore(settings.resolved_journal_url())
    journal = JournalStore(settings.resolved_journal_url())
    async with running_worker(temporal_env, settings, conversation_memory=False) as (client, _backend):
        conversation = await signed_in(client, "mem-off")
        state = await client.state(conversation)
        assert state.customer.details_loaded and state.customer.memory is None and not state.rejections
        asked = await client.send_message(conversation, "Please remember that refunds go to my gift card")
        assert asked.awaiting_confirmation is None and "can't keep anything" in asked.text, asked
        told = await client.send_message(conversation, "What do you remember about me?")
        assert "don't remember anything" in told.text, told.text
    assert facts(settings, store) == {}
    versions = {row.prompt_version for row in await asyncio.to_thread(journal.decisions, conversation)}
    assert versions == {PROMPT_VERSION_WITHOUT_MEMORY}
    store.dispose()
    journal.close()


async def test_a_worker_without_memory_under_a_conversation_with_memory_keeps_nothing(temporal_env, settings):
    store = MemoryStore(settings.resolved_journal_url())
    async with running_worker(temporal_env, settings) as (client, _backend):
        conversation = await signed_in(client, "mem-off")
        assert (await client.state(conversation)).customer.memory == []
        asked = await client.send_message(conversation, "Please remember that refunds go to my gift card")
        assert asked.awaiting_confirmation
        refused = await client.send_message(conversation, "yes")
        assert "did not go through" in refused.text, refused.text
    assert facts(settings, store) == {}
    store.dispose()


class DownMemory:
    """A memory whose database never answers (every call fails like a lost connection)."""

    def invoke(self, *args, **kwargs):
        raise ConnectionError("the memory's database does not answer")

    recorded = invoke

    def has_store(self, store: str) -> bool:
        return True


async def test_a_memory_that_cannot_be_read_leaves_the_conversation_going(temporal_env, settings):
    async with running_worker(temporal_env, settings, memory=DownMemory()) as (client, _backend):
        conversation = await signed_in(client, "mem-down")
        state = await client.state(conversation)
        assert state.customer.memory is None and state.customer.details_loaded
        assert state.rejections[-1].rule == "tool-error" and "get_remembered_facts" in state.rejections[-1].reason
        asked = await client.send_message(conversation, f"I want to return everything in order {PAID_BY_CARD[0]}")
        assert asked.awaiting_confirmation and CREDIT_CARD in asked.awaiting_confirmation, asked
