"""A conversation's ``operation.compensated`` and ``ticket.opened`` on a real Temporal dev server,
a real worker and the journal on SQLite (the model is a scripted brain): a cancel with rollback
after an applied address change undoes it and records ``operation.compensated`` (the operation,
the tool, no address) before the cancellation's summary and ``conversation.ended`` (cancelled); a hand-over to a human agent
records ``ticket.opened`` (its ticket id, reason ``transfer``) before ``conversation.ended``
(transferred). No payload holds the customer's id, email, name or address.
"""

from __future__ import annotations

import asyncio
import json
import uuid

from activities.store.journal import JournalStore
from tests.policy_fixtures import CUSTOMER, EMAIL
from tests.workflow_harness import Script, call, reply, running_worker, user_details
from workflows.domain import journal as ev
from workflows.domain import keys

NEW_ADDRESS = dict(address1="1 New Street", address2="", city="Austin", state="TX", country="USA", zip="78701")


async def ended_events(journal: JournalStore, cid: str) -> list:
    """The conversation's events once its ``conversation.ended`` is in."""
    for _ in range(200):
        found = await asyncio.to_thread(journal.events, cid)
        if found and found[-1].type == "conversation.ended":
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"no conversation.ended for {cid}: {[e.type for e in found]}")


def no_personal_data(events: list) -> None:
    text = json.dumps([e.model_dump(mode="json") for e in events]).lower()
    assert not any(part in text for part in (CUSTOMER, EMAIL.lower(), "sanchez", "new street", "austin"))


async def test_a_rollback_records_the_undone_write_and_a_transfer_its_ticket(temporal_env, settings):
    journal = JournalStore(settings.resolved_journal_url())
    script = Script([call("find_user_id_by_email", email=EMAIL), reply("Hello, how can I help?"),
                     call("get_user_details", user_id=CUSTOMER),
                     call("modify_user_address", user_id=CUSTOMER, **NEW_ADDRESS)])
    async with running_worker(temporal_env, settings, brain=script) as (client, backend):
        before = user_details(backend, CUSTOMER)["address"]
        undone = await client.start_conversation(f"undo-events-{uuid.uuid4().hex[:6]}")
        await client.send_message(undone, f"Hi, my email is {EMAIL}")
        assert (await client.send_message(undone, "Change my address to 1 New Street, Austin")).awaiting_confirmation
        await client.send_message(undone, "yes")
        await client.cancel(undone, reason="the customer changed their mind", rollback=True)
        rolled_back = await ended_events(journal, undone)
        assert user_details(backend, CUSTOMER)["address"] == before

    transfer = Script([call("find_user_id_by_email", email=EMAIL),
                       {"kind": "transfer_to_human", "summary": "customer wants to dispute a charge"}])
    async with running_worker(temporal_env, settings, brain=transfer) as (client, backend):
        handed = await client.start_conversation(f"hand-events-{uuid.uuid4().hex[:6]}")
        await client.send_message(handed, f"Hi, my email is {EMAIL}; I want a person")
        handed_over = await ended_events(journal, handed)
        [ticket] = [t for t in backend.tickets("main") if handed in t["ticket_key"]]

    types = [e.type for e in rolled_back]
    assert types[-3:] == ["operation.compensated", "conversation.replied", "conversation.ended"], types
    applied = next(e for e in rolled_back if e.type == "operation.applied")
    assert rolled_back[-3].data == applied.data == {"conversation_id": undone, "operation_id": f"{undone}.t2",
                                                    "tool": "modify_user_address"}
    assert rolled_back[-1].data["status"] == "cancelled"

    types = [e.type for e in handed_over]
    assert types[-3:] == ["ticket.opened", "conversation.replied", "conversation.ended"], types
    assert handed_over[-3].data == {"conversation_id": handed, "ticket_id": ev.ticket_id(ticket["ticket_key"]),
                                    "reason": "transfer"}
    assert ticket["ticket_key"] == keys.transfer_ticket_key(handed, 1)
    assert handed_over[-1].data["status"] == "transferred"
    for events in (rolled_back, handed_over):
        assert [e.sequence for e in events] == list(range(1, len(events) + 1))
        no_personal_data(events)
