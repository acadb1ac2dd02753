"""Retention on a real Temporal dev server (its own: a purge acts on the whole namespace), a
real worker and the SQLite system of record and journal: ``DataErasure.purge`` removes the
conversations closed before the cutoff, everywhere (their runs and their refunds' runs, journal
rows and refund events, ledger rows, emails, tickets; a journal-only conversation; an old
standalone refund, whose ledger row is anonymised and events removed), and keeps a conversation still running, one closed since,
and one that started before the cutoff but closed after it. The Temporal Schedule
(``statekeeper retention schedule``) starts ``RetentionWorkflow``, which purges through a worker."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from temporalio.client import WorkflowExecutionStatus

from activities.store.journal import JournalStore, ModelCallRecord
from activities.store.audit import AuditLog
from activities.store.memory import MemoryStore
from starter.client.conversations import StatekeeperClient
from starter.cli.erasure import SCHEDULE_ID, ensure_schedule, retention_schedule
from systems.retail.erasure import ERASED_RESULT
from tests.memory_fixtures import remember
from tests.policy_fixtures import EMAIL
from tests.workflow_harness import NO_APPROVALS, running_worker, until
from tests.workflows.erasure_fixtures import (
    OTHER_EMAIL,
    OTHER_PENDING,
    exists,
    gone,
    journal_holds,
    env,  # noqa: F401  (the module-scoped fixture)
    return_then_transfer,
    transfer_on_request,
)
from starter.runtime.worker import build_backend, build_erasure
from workflows.domain.actions import call_arguments
from workflows.domain.contracts import RefundOutcome
from workflows.domain.keys import idempotency_key
from workflows.domain.memory import FactKind
from workflows.retention.workflow import PurgeSummary
from workflows.refund.standalone import RefundRequest

OTHER_PENDING_2 = "#W5500815"


def ghost(journal: JournalStore, cid: str) -> None:
    """A conversation only the journal remembers (Temporal's own retention dropped it)."""
    journal.record_model_call(ModelCallRecord(conversation_id=cid, turn=1, call_seq=1, customer_id="someone_1",
                                              prompt_version="p", model="m", view={},
                                              recorded_at=datetime(2020, 1, 1, tzinfo=timezone.utc)))


async def closed_in_visibility(client, workflow_id: str,
                               status: WorkflowExecutionStatus = WorkflowExecutionStatus.COMPLETED) -> bool:
    return [w.status async for w in client.list_workflows(f"WorkflowId = '{workflow_id}'")] == [status]


async def test_purge_removes_only_conversations_closed_before_the_cutoff(env, settings):
    tag = uuid.uuid4().hex[:6]
    old, late, running, lost = f"old-{tag}", f"late-{tag}", f"running-{tag}", f"lost-{tag}"
    async with running_worker(env, settings, brain=transfer_on_request) as (client, backend):
        journal = JournalStore(settings.resolved_journal_url())
        ghost(journal, lost)
        await return_then_transfer(client, old)
        request = await client.request_refund(RefundRequest(request_id=f"r-{tag}", order_id=OTHER_PENDING_2,
                                                            operation="cancel", reason="no longer needed"))
        await until(lambda: _applied(client, request.refund_id), "the standalone refund")
        for cid in (late, running):  # both begin before the cutoff
            await client.start_conversation(cid)
        await client.send_message(late, f"Hi, my email is {OTHER_EMAIL}")
        await client.send_message(running, f"Hi, my email is {EMAIL}")
        await journal_holds(journal, old, 8)
        await until(lambda: closed_in_visibility(env.client, f"support-{old}"), "the old conversation closed")
        cutoff = datetime.now(timezone.utc)
        # `late` closes after the cutoff: kept whole, with its refund
        asking = await client.send_message(late, f"Please cancel order {OTHER_PENDING}, I ordered it by mistake")
        assert asking.awaiting_confirmation, asking.text
        await client.send_message(late, "yes")
        assert (await client.send_message(late, "I need a human please")).status == "transferred"
        [late_refund] = [op.child_workflow_id for op in (await client.state(late)).completed_operations]
        [old_refund] = [op.child_workflow_id for op in (await client.state(old)).completed_operations]
        await journal_holds(journal, late, 8)
        await until(lambda: journal.refund_events(request.refund_id) and journal.refund_events(late_refund),
                    "the refunds' events")
        assert journal.refund_events(old_refund)
        kept_journal = {cid: journal.transcript(cid) for cid in (late, running)}
        tickets_before = {t["ticket_key"] for t in backend.tickets("main")}

        memory = MemoryStore(settings.resolved_journal_url())
        # a complaint confirmed 100 days ago is past its 90 days; a language confirmed then is not
        long_ago = datetime.now(timezone.utc) - timedelta(days=100)
        remember(memory, "cust-a", FactKind.OPEN_COMPLAINT, "late parcel", at=long_ago)
        language = remember(memory, "cust-a", FactKind.PREFERRED_LANGUAGE, "Spanish", at=long_ago)

        erasure = build_erasure(env.client, settings, backend)
        summary = await erasure.purge(cutoff, "retention-test")

        assert summary == PurgeSummary(conversations=2, workflow_runs=3, journal_rows=summary.journal_rows,
                                       ledger_deleted=1, ledger_anonymised=1, outbox_deleted=1, tickets_deleted=1,
                                       memory_facts=1)
        assert memory.facts("default", "cust-a", datetime.now(timezone.utc)) == [language]
        assert summary.journal_rows > 8
        await gone(env.client, [f"support-{old}", old_refund, request.refund_id])
        for kept in (f"support-{late}", late_refund, f"support-{running}"):
            assert await exists(env.client, kept), kept
        handle = env.client.get_workflow_handle(f"support-{running}")
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        assert journal.transcript(old) == [] and journal.decisions(conversation_id=lost) == []
        # refunds' events go with their runs: the old conversation's and the standalone request's
        assert journal.refund_events(old_refund) == journal.refund_events(request.refund_id) == []
        assert [e.type for e in journal.refund_events(late_refund)][-1] == "refund.completed"
        assert {cid: journal.transcript(cid) for cid in (late, running)} == kept_journal
        assert {t["ticket_key"] for t in backend.tickets("main")} == tickets_before - {f"transfer:{old}:t4"}
        ledger = {e["idempotency_key"]: e["result"] for e in backend.ledger_entries("main")}
        assert not [k for k in ledger if old in k]
        assert ledger[f"cancel_pending_order:{OTHER_PENDING_2}:r-{tag}.req"] == ERASED_RESULT
        assert ledger[f"cancel_pending_order:{OTHER_PENDING}:{late}.t2"] != ERASED_RESULT
        assert [m["message_key"] for m in backend.outbox_messages("main")] == []

        [entry] = AuditLog(settings.resolved_journal_url()).entries(subject="retention")
        assert (entry.actor, entry.action) == ("retention-test", "retention_purge")
        assert entry.detail.startswith(f"older_than={cutoff:%Y-%m-%dT%H:%M:%SZ} conversations=2 workflow_runs=3")

        again = await erasure.purge(cutoff, "retention-test")  # idempotent: nothing left to remove
        assert again == PurgeSummary()
        await client.cancel(running, "test over")


async def _applied(client, refund_id: str) -> bool:
    return (await client.refund(refund_id)).status == "applied"


async def test_the_schedule_runs_the_purge_on_a_worker(env, settings):
    cid = f"scheduled-{uuid.uuid4().hex[:6]}"
    async with running_worker(env, settings, brain=transfer_on_request) as (client, _):
        await client.start_conversation(cid)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert (await client.send_message(cid, "I need a human")).status == "transferred"
        await until(lambda: closed_in_visibility(env.client, f"support-{cid}"), "the conversation closed")
        # the purge below keeps what closed less than 1e-6 days (86 ms) before it starts: a fast
        # machine triggers it sooner than that, and the conversation was then (rightly) kept
        await asyncio.sleep(0.5)

        every = timedelta(days=1)
        assert await ensure_schedule(env.client, retention_schedule(settings, 1.0, every))
        assert not await ensure_schedule(env.client, retention_schedule(settings, 1e-6, timedelta(hours=12)))
        schedule = env.client.get_schedule_handle(SCHEDULE_ID)
        try:
            described = await schedule.describe()
            assert described.schedule.spec.intervals[0].every == timedelta(hours=12)  # updated in place
            await schedule.trigger()
            await until(lambda: _purges(env.client), "a RetentionWorkflow run", 30)
            [run] = [w async for w in env.client.list_workflows("WorkflowType = 'RetentionWorkflow'")]
            result = await env.client.get_workflow_handle(run.id, run_id=run.run_id,
                                                          result_type=PurgeSummary).result()
        finally:
            await schedule.delete()
        assert result.conversations >= 1 and result.tickets_deleted >= 1
        await gone(env.client, [f"support-{cid}"])
        [entry] = AuditLog(settings.resolved_journal_url()).entries(subject="retention")
        assert entry.actor == "retention-schedule"


async def _purges(client) -> bool:
    return [w.status async for w in client.list_workflows("WorkflowType = 'RetentionWorkflow'")] == [
        WorkflowExecutionStatus.COMPLETED]


async def test_purge_keeps_the_ledger_row_of_a_standalone_refund_still_running(env, settings):
    """A standalone refund whose write committed while its worker died before the activity
    completed still runs, and its retried write (or ledger look-up) answers from the ledger row.
    A purge whose cutoff comes after that row must leave it whole: anonymised, the refund was
    answered ``erased`` and a cancel's money (read back from the recorded order) never moved.
    Here the refund is started before any worker polls its queue and the row is written by the
    system of record directly, under the refund's own key (what the dead worker's attempt did)."""
    tag = uuid.uuid4().hex[:6]
    request = RefundRequest(request_id=f"mid-{tag}", order_id=OTHER_PENDING_2, operation="cancel",
                            reason="no longer needed")
    starter = StatekeeperClient(env.client, settings.task_queue, settings.write_timeout_seconds, approvals=NO_APPROVALS)

    async def polled() -> None:  # the worker that polled a moment ago has just died
        return None

    starter.require_worker = polled
    started = await starter.request_refund(request)
    inp = request.refund_input()
    key = idempotency_key(inp.call, inp.operation_id)
    backend = build_backend(settings)
    written = backend.invoke("main", inp.call.name, call_arguments(inp.call), idempotency_key=key)
    assert written.applied, written.result
    cutoff = datetime.now(timezone.utc) + timedelta(seconds=1)

    summary = await build_erasure(env.client, settings, backend).purge(cutoff, "retention-test")

    ledger = {e["idempotency_key"]: e["result"] for e in backend.ledger_entries("main")}
    assert ledger[key] != ERASED_RESULT, summary
    assert (await env.client.get_workflow_handle(started.refund_id).describe()).status == \
        WorkflowExecutionStatus.RUNNING
    async with running_worker(env, settings, brain=transfer_on_request) as (client, _):
        await until(lambda: _applied(client, started.refund_id), "the standalone refund", 30)
        outcome = await env.client.get_workflow_handle(started.refund_id, result_type=RefundOutcome).result()
    assert json.loads(outcome.result)["status"] == "cancelled", outcome.result


async def test_a_conversation_whose_refund_closed_after_the_cutoff_is_kept_whole(env, settings, tmp_path):
    """An operator terminates a conversation while its refund child writes; the child, abandoned
    (``ParentClosePolicy.ABANDON``), finishes after the cutoff. The conversation must be kept whole
    like one with a run closed since: purged, its journal, ledger row and run would go while the
    child's run (the customer's order and email in its input) stayed, and no later purge could
    delete that run, whose parent it would not know."""
    cid = f"orphan-{uuid.uuid4().hex[:6]}"
    marker = tmp_path / "committed.marker"
    async with running_worker(env, settings, brain=transfer_on_request, pause_after_write=(4.0, marker)) as (
            client, backend):
        journal = JournalStore(settings.resolved_journal_url())
        await client.start_conversation(cid)
        await client.send_message(cid, f"Hi, my email is {OTHER_EMAIL}")
        asking = await client.send_message(cid, f"Please cancel order {OTHER_PENDING}, I ordered it by mistake")
        assert asking.awaiting_confirmation, asking.text
        told = asyncio.create_task(client.send_message(cid, "yes"))
        await until(lambda: marker.exists(), "the refund's write to commit")
        await env.client.get_workflow_handle(f"support-{cid}").terminate(reason="an operator stopped it")
        await until(lambda: closed_in_visibility(env.client, f"support-{cid}", WorkflowExecutionStatus.TERMINATED),
                    "the conversation terminated")
        cutoff = datetime.now(timezone.utc)
        [child] = [w.id async for w in env.client.list_workflows(f"ParentWorkflowId = 'support-{cid}'")]
        await until(lambda: closed_in_visibility(env.client, child), "the abandoned refund to finish", 30)
        await asyncio.gather(told, return_exceptions=True)  # its conversation was terminated
        before = journal.transcript(cid)

        summary = await build_erasure(env.client, settings, backend).purge(cutoff, "retention-test")

        assert await exists(env.client, f"support-{cid}") and await exists(env.client, child), summary
        assert journal.transcript(cid) == before and before
        assert [e for e in backend.ledger_entries("main") if cid in e["idempotency_key"]]
