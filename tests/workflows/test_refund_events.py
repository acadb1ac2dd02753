"""A refund's own events (``workflows.refund.events``) on a real Temporal dev server, a real
worker and the journal on SQLite: a refund above the approval threshold has its
``approval.requested`` in the journal while it waits for the supervisor; approved, it adds
``approval.decided``, ``operation.applied`` and ``refund.completed`` (applied), numbered 1 to 4;
rejected, ``refund.completed`` is refused with rule ``approval-rejected``; expired, an
``approval.expired``, a ``ticket.opened`` (reason ``approval_expired``) and rule
``approval-expired``; a cancel of an order that is not pending is refused on its policy clause.
Every event carries the refund id, none the customer's id, email or name; the journal keeps
them apart from conversations' events (a conversation named like the refund reads none), and
the run's history replays with today's code.
"""

from __future__ import annotations

import asyncio
import json

from temporalio.worker import Replayer

from activities.store.journal import JournalStore
from starter.runtime.connection import data_converter
from tests.policy_fixtures import CUSTOMER, DELIVERED, EMAIL
from tests.workflow_harness import running_worker
from tests.workflows.test_refund_approvals import CANCEL, pending_approval, start
from workflows.conversation.workflow import SupportWorkflow
from workflows.domain.actions import make_tool_call
from workflows.refund.workflow import RefundWorkflow


async def refund_events(journal: JournalStore, refund_id: str, at_least: int) -> list:
    for _ in range(200):
        found = await asyncio.to_thread(journal.refund_events, refund_id)
        if len(found) >= at_least:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"{len(found)} events of {refund_id}, expected {at_least}")


def check(events: list, refund_id: str) -> None:
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert len({e.id for e in events}) == len(events)
    assert all(e.data["refund_id"] == refund_id for e in events)
    text = json.dumps([e.model_dump(mode="json") for e in events]).lower()
    assert CUSTOMER.lower() not in text and EMAIL.lower() not in text and "sanchez" not in text


async def test_an_approved_refund_tells_its_approval_while_it_waits_then_its_outcome(temporal_env, settings):
    journal = JournalStore(settings.resolved_journal_url())
    async with running_worker(temporal_env, settings) as (client, _):
        handle, operation, _ = await start(temporal_env.client, settings, CANCEL)
        approval = await pending_approval(handle)
        [requested] = await refund_events(journal, handle.id, 1)  # in the journal while it waits
        assert requested.type == "approval.requested" and requested.sequence == 1
        assert requested.data == {"refund_id": handle.id, "operation_id": operation, "tool": "cancel_pending_order",
                                  "order_id": CANCEL.arguments.order_id, "approval_id": approval.approval_id,
                                  "amount": "826.70", "status": "pending",
                                  "expires_at": approval.expires_at.isoformat()}
        assert await asyncio.to_thread(journal.events, handle.id) == []  # not a conversation's stream

        await client.decide_approval(approval.approval_id, "approve", "alice")
        assert (await handle.result()).ok
        events = await refund_events(journal, handle.id, 4)
        history = await handle.fetch_history()
    check(events, handle.id)
    assert events[0] == requested
    assert [e.type for e in events] == ["approval.requested", "approval.decided", "operation.applied",
                                        "refund.completed"]
    decided, applied, completed = (e.data for e in events[1:])
    assert decided["decision"] == "approved" and decided["decided_at"]
    assert applied["amount"] == "826.70" and applied["approval_id"] == approval.approval_id
    assert completed["status"] == "applied" and "rule" not in completed
    replayed = await Replayer(workflows=[SupportWorkflow, RefundWorkflow], data_converter=data_converter()
                              ).replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None


async def test_a_rejected_an_expired_and_a_refused_refund_complete_with_their_rule(temporal_env, settings):
    journal = JournalStore(settings.resolved_journal_url())
    async with running_worker(temporal_env, settings) as (client, backend):
        rejected, _, _ = await start(temporal_env.client, settings, CANCEL)
        approval = await pending_approval(rejected)
        await client.decide_approval(approval.approval_id, "reject", "alice")
        expired, _, _ = await start(temporal_env.client, settings, CANCEL, timeout=2.0)
        not_pending, _, _ = await start(temporal_env.client, settings, make_tool_call(
            "cancel_pending_order", {"order_id": DELIVERED, "reason": "no longer needed"}))
        for handle in (rejected, expired, not_pending):
            assert not (await handle.result()).ok
        by_refund = {h.id: await refund_events(journal, h.id, n)
                     for h, n in ((rejected, 3), (expired, 4), (not_pending, 1))}
        [ticket] = backend.tickets("main")

    for refund_id, events in by_refund.items():
        check(events, refund_id)
        assert events[-1].type == "refund.completed" and events[-1].data["status"] == "refused"
    assert [e.type for e in by_refund[rejected.id]] == ["approval.requested", "approval.decided", "refund.completed"]
    assert by_refund[rejected.id][-1].data["rule"] == "approval-rejected"
    assert [e.type for e in by_refund[expired.id]] == ["approval.requested", "approval.expired", "ticket.opened",
                                                       "refund.completed"]
    opened = by_refund[expired.id][2].data
    assert opened["reason"] == "approval_expired" and opened["ticket_id"].startswith("tkt_")
    assert ticket["ticket_key"] not in json.dumps(opened)  # the ticket's id, never its key
    assert by_refund[expired.id][-1].data["rule"] == "approval-expired"
    assert [e.type for e in by_refund[not_pending.id]] == ["refund.completed"]
    assert by_refund[not_pending.id][-1].data["rule"] == "cancel-pending-only"


async def test_a_conversation_named_as_a_refund_reads_none_of_its_events(temporal_env, settings):
    journal = JournalStore(settings.resolved_journal_url())
    async with running_worker(temporal_env, settings) as (client, _):
        handle, _, _ = await start(temporal_env.client, settings, make_tool_call(
            "cancel_pending_order", {"order_id": DELIVERED, "reason": "no longer needed"}))
        await handle.result()
        await refund_events(journal, handle.id, 1)
        await client.start_conversation(handle.id)  # a caller's conversation id is any text
        await client.send_message(handle.id, "hello")
        for _ in range(100):
            if await asyncio.to_thread(journal.events, handle.id):
                break
            await asyncio.sleep(0.1)
        conversation = await asyncio.to_thread(journal.events, handle.id)
        refund = await asyncio.to_thread(journal.refund_events, handle.id)
    assert conversation and all(e.data.get("conversation_id") == handle.id for e in conversation)
    assert [e.type for e in refund] == ["refund.completed"] and "refund_id" not in conversation[0].data
