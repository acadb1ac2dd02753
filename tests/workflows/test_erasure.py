"""``statekeeper erase --customer``'s engine (``activities.erasure.DataErasure``) on a real
Temporal dev server (the erasure tests' own), a real worker, the SQLite system of record and
journal: a real conversation of the customer (a return with its refund, ledger row and email; a
transfer with its ticket; journal rows; its refund's events), then erasure leaves nothing of
theirs in any store or in Temporal (the histories cannot be fetched any more), another
customer's conversation (and its refund's events) is untouched, and the audit log holds the erasure. A running conversation makes erasure refuse
and change nothing, unless told to terminate it. Erasure reaches the external email and
ticketing services too (over HTTP): the emails sent to the customer and the tickets of their
conversations there are deleted; another customer's stay.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timezone

import httpx
import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from activities.erasure.service import RunningWork
from activities.store.audit import AuditLog
from activities.store.journal import JournalStore
from activities.store.memory import MemoryStore
from starter.client.conversations import StatekeeperClient
from starter.runtime.worker import build_backend, build_erasure
from tests.memory_fixtures import remember
from tests.policy_fixtures import CUSTOMER, EMAIL, PENDING
from tests.service_fixtures import services  # noqa: F401 - fixture
from tests.workflow_harness import NO_APPROVALS, running_worker, until
from tests.workflows.erasure_fixtures import (
    OTHER,
    OTHERS,
    PERSONAL,
    cancel_then_transfer,
    exists,
    gone,
    journal_holds,
    journal_rows,
    mentioning,
    env,  # noqa: F401  (the module-scoped fixture)
    return_then_transfer,
    side_rows,
    transfer_on_request,
)
from workflows.domain import keys
from workflows.domain.actions import make_tool_call
from workflows.domain.contracts import RefundInput
from workflows.domain.memory import FactKind
from workflows.domain.pseudonym import customer_pseudonym
from workflows.options import CUSTOMER_ID
from workflows.refund.standalone import RefundRequest
from workflows.refund.workflow import RefundWorkflow


async def test_erasing_a_customer_leaves_nothing_of_theirs_anywhere(env, settings):
    raj, sofia = f"erase-raj-{uuid.uuid4().hex[:6]}", f"erase-sofia-{uuid.uuid4().hex[:6]}"
    async with running_worker(env, settings, brain=transfer_on_request) as (client, backend):
        await return_then_transfer(client, raj)
        await cancel_then_transfer(client, sofia)
        raj_state, sofia_state = await client.state(raj), await client.state(sofia)
        journal = JournalStore(settings.resolved_journal_url())
        await journal_holds(journal, raj, 8)
        await journal_holds(journal, sofia, 8)
        [refund] = [op.child_workflow_id for op in raj_state.completed_operations]
        [sofia_refund] = [op.child_workflow_id for op in sofia_state.completed_operations]
        runs = [f"support-{raj}", refund]
        await until(lambda: journal.refund_events(refund) and journal.refund_events(sofia_refund),
                    "the refunds' events")
        sofia_refund_events = journal.refund_events(sofia_refund)

        # before the erasure: the scans see the customer in every store (so they can fail)
        stores = side_rows(backend)
        assert len(mentioning(stores, PERSONAL)) >= 2 and len(mentioning(journal_rows(journal), PERSONAL)) >= 4
        assert len(mentioning([r for r in stores if '"to_email"' in r], (EMAIL,))) == 1  # the return's email
        theirs_in_temporal = [w.id async for w in env.client.list_workflows(
            f"{CUSTOMER_ID.name} = '{customer_pseudonym(CUSTOMER, settings.pseudonym_secret())}'")]
        assert sorted(set(theirs_in_temporal)) == sorted(runs)
        others_stores, others_journal = mentioning(stores, OTHERS), mentioning(journal_rows(journal), OTHERS)
        assert others_stores and others_journal

        memory = MemoryStore(settings.resolved_journal_url())
        remember(memory, customer_pseudonym(CUSTOMER, settings.pseudonym_secret()), FactKind.PREFERRED_LANGUAGE, "Spanish")
        remember(memory, customer_pseudonym(CUSTOMER, settings.pseudonym_secret()), FactKind.OPEN_COMPLAINT, "late")
        sofia_fact = remember(memory, customer_pseudonym(OTHER, settings.pseudonym_secret()),
                              FactKind.PREFERRED_LANGUAGE, "Italian")
        report = await build_erasure(env.client, settings, backend).erase_customer(CUSTOMER, "operator-7")

        pseudonym = customer_pseudonym(CUSTOMER, settings.pseudonym_secret())
        assert report.memory_facts == 2 and memory.facts("default", pseudonym, datetime.now(timezone.utc)) == []
        assert memory.facts("default", customer_pseudonym(OTHER, settings.pseudonym_secret()),
                            datetime.now(timezone.utc)) == [sofia_fact]
        assert report.pseudonym == pseudonym and report.conversations == 1 and report.terminated == 0
        assert report.workflow_runs == 2 and report.journal_rows > 0
        assert report.records.model_dump() == {"ledger_deleted": 1, "ledger_anonymised": 0, "outbox_deleted": 1,
                                               "tickets_deleted": 1}
        assert mentioning(side_rows(backend), PERSONAL) == [] and mentioning(journal_rows(journal), PERSONAL) == []
        assert journal.transcript(raj) == [] and journal.decisions(conversation_id=raj) == []
        assert journal.refund_events(refund) == [] and journal.refund_events(sofia_refund) == sofia_refund_events
        # the other customer's records are exactly as they were
        assert mentioning(side_rows(backend), OTHERS) == others_stores
        assert mentioning(journal_rows(journal), OTHERS) == others_journal
        await gone(env.client, runs)
        assert await exists(env.client, f"support-{sofia}") and await exists(env.client, sofia_refund)
        await until(lambda: _none_listed(env.client, pseudonym), "the customer's runs leaving visibility")

        [entry] = AuditLog(settings.resolved_journal_url()).entries(subject=pseudonym)
        assert (entry.actor, entry.action) == ("operator-7", "erase_customer")
        assert "conversations=1" in entry.detail and "workflow_runs=2" in entry.detail
        assert mentioning([entry.model_dump_json()], PERSONAL) == []

        # erasing again finds nothing left and says so
        again = await build_erasure(env.client, settings, backend).erase_customer(CUSTOMER, "operator-7")
        assert (again.conversations, again.workflow_runs, again.journal_rows, again.memory_facts) == (0, 0, 0, 0)


async def _none_listed(client, pseudonym: str) -> bool:
    return [w async for w in client.list_workflows(f"{CUSTOMER_ID.name} = '{pseudonym}'")] == []


async def test_a_running_conversation_is_refused_then_terminated_on_request(env, settings):
    cid = f"erase-running-{uuid.uuid4().hex[:6]}"
    async with running_worker(env, settings, brain=transfer_on_request) as (client, backend):
        await client.start_conversation(cid)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        journal = JournalStore(settings.resolved_journal_url())
        await journal_holds(journal, cid, 2)
        before = journal_rows(journal)
        erasure = build_erasure(env.client, settings, backend)
        pseudonym = customer_pseudonym(CUSTOMER, settings.pseudonym_secret())

        with pytest.raises(RunningWork) as refused:
            await erasure.erase_customer(CUSTOMER, "operator-7")
        assert refused.value.workflow_ids == [f"support-{cid}"] and "--terminate-running" in str(refused.value)
        handle = env.client.get_workflow_handle(f"support-{cid}")
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        assert journal_rows(journal) == before  # nothing erased
        audit = AuditLog(settings.resolved_journal_url())
        assert [(e.action, e.detail) for e in audit.entries(subject=pseudonym)] == [
            ("erase_customer_refused", "running_workflows=1")]

        report = await erasure.erase_customer(CUSTOMER, "operator-7", terminate_running=True)
        assert (report.terminated, report.workflow_runs, report.conversations) == (1, 1, 1)
        await gone(env.client, [f"support-{cid}"])
        assert mentioning(journal_rows(journal), PERSONAL) == []
        assert [e.action for e in audit.entries(subject=pseudonym)] == ["erase_customer_refused", "erase_customer"]


async def test_the_runs_before_authentication_of_an_id_a_query_cannot_quote_are_erased_too(env, settings):
    # the Python client takes any id; one with a space or a letter outside ASCII cannot be quoted
    # in a visibility query by workflow id, and the runs it continued as new from before the
    # customer authenticated (no CustomerId on them) must not keep what the user had said
    from workflows.domain.contracts import SupportInput
    from workflows.conversation.workflow import SupportWorkflow

    cid = f"erase über {uuid.uuid4().hex[:6]}"
    async with running_worker(env, settings) as (client, backend):
        await env.client.start_workflow(SupportWorkflow.run, SupportInput(conversation_id=cid, max_turns_per_run=1),
                                        id=f"support-{cid}", task_queue=settings.task_queue)
        await client.send_message(cid, "Hello, this is Raj Sanchez, I need help with an order")
        await client.send_message(cid, f"my email is {EMAIL}")
        state = await client.state(cid)
        assert state.customer is not None and state.customer.user_id == CUSTOMER
        handle = env.client.get_workflow_handle(f"support-{cid}")
        first = (await anext(aiter(handle.fetch_history_events()))).workflow_execution_started_event_attributes
        pre_auth = first.continued_execution_run_id
        assert pre_auth, "no continue-as-new before authentication: the test would prove nothing"

        report = await build_erasure(env.client, settings, backend).erase_customer(CUSTOMER, "operator-7",
                                                                                   terminate_running=True)
        assert report.conversations == 1 and report.workflow_runs >= 3  # the runs before, at and after authentication

        async def pre_auth_gone() -> bool:
            try:
                await env.client.get_workflow_handle(f"support-{cid}", run_id=pre_auth).describe()
            except RPCError as err:
                return err.status == RPCStatusCode.NOT_FOUND
            return False

        await until(pre_auth_gone, "the run before authentication to be deleted")


@pytest.mark.parametrize("bad", ["", "raj sanchez", "raj'; drop", "x" * 129, "ｒａｊ"])
async def test_a_malformed_customer_id_is_refused_before_anything(env, settings, bad):
    settings.pseudonym_secret()  # as a worker makes it
    with pytest.raises(ValueError, match="customer id"):
        await build_erasure(env.client, settings).erase_customer(bad, "operator-7")
    assert AuditLog(settings.resolved_journal_url()).entries() == []



async def _refund_before_any_worker(env, settings, kind: str) -> tuple[str, str]:
    """A refund of the customer's pending order started while no worker polls: a standalone
    request (``POST /refunds``: it carries ``OrderIds``) or a conversation's child (started as
    its parent starts it: no search attribute of the customer or the order). Returns its
    workflow id and the idempotency key it would write under."""
    tag = uuid.uuid4().hex[:6]
    if kind == "standalone":
        request = RefundRequest(request_id=f"erase-{tag}", order_id=PENDING, operation="cancel",
                                reason="no longer needed")
        starter = StatekeeperClient(env.client, settings.task_queue, settings.write_timeout_seconds,
                                    approvals=NO_APPROVALS)

        async def polled() -> None:  # the worker that polled a moment ago has just died
            return None

        starter.require_worker = polled
        inp = request.refund_input()
        return (await starter.request_refund(request)).refund_id, keys.idempotency_key(inp.call, inp.operation_id)
    operation = keys.operation_id(f"erase-child-{tag}", 2)
    call = make_tool_call("cancel_pending_order", {"order_id": PENDING, "reason": "no longer needed"})
    inp = RefundInput(store="main", operation_id=operation, call=call, expected_user_id=CUSTOMER, notify_email=EMAIL,
                      conversation_id=f"erase-child-{tag}", approvals=NO_APPROVALS)
    refund_id = keys.refund_workflow_id("main", PENDING, operation)
    await env.client.start_workflow(RefundWorkflow.run, inp, id=refund_id, task_queue=settings.task_queue)
    return refund_id, keys.idempotency_key(call, operation)


@pytest.mark.parametrize("kind", ["standalone", "child"])
async def test_a_refund_no_worker_has_run_yet_is_running_work(env, settings, kind):
    """A refund of one of the customer's orders that no worker has run yet carries no
    ``CustomerId`` (the refund sets it from its first workflow task): erasure must still see it
    running and refuse, and with ``terminate_running`` stop it. Missed, it ran after the erasure
    had reported the customer erased and wrote their order, with its address and payment ids,
    into the ledger (a conversation's child, abandoned by its terminated parent, emailed them too)."""
    refund_id, key = await _refund_before_any_worker(env, settings, kind)
    settings.pseudonym_secret()  # the key file the workers made (none has run in this data directory)
    erasure = build_erasure(env.client, settings, build_backend(settings))

    with pytest.raises(RunningWork) as refused:
        await erasure.erase_customer(CUSTOMER, "dpo-test")
    assert refused.value.workflow_ids == [refund_id]
    report = await erasure.erase_customer(CUSTOMER, "dpo-test", terminate_running=True)
    assert report.terminated == 1
    async with running_worker(env, settings, brain=transfer_on_request) as (_, backend):
        await asyncio.sleep(2)  # a worker now polls the queue: the refund, had it survived, would write
        assert not [e for e in backend.ledger_entries("main") if e["idempotency_key"] == key]
        assert not [m for m in backend.outbox_messages("main") if key in m["message_key"]]
    await gone(env.client, [refund_id])


# --- The email and ticketing services ---

def _held(services: dict[str, str], service: str, path: str, reference: str) -> list[dict]:  # noqa: F811
    return httpx.get(f"{services[service]}{path}", params={"reference": reference}).json()


def _tickets_of(services: dict[str, str], conversation: str) -> list[str]:  # noqa: F811
    references = httpx.get(f"{services['ticketing']}/tickets/references").json()
    return [r for r in references if r.startswith(f"transfer:{conversation}:")]


async def test_erasing_a_customer_reaches_the_email_and_ticketing_services(env, settings, services):  # noqa: F811
    raj, sofia = f"erase-svc-raj-{uuid.uuid4().hex[:6]}", f"erase-svc-sofia-{uuid.uuid4().hex[:6]}"
    with_services = settings.model_copy(update={f"{n}_url": u for n, u in services.items()})
    async with running_worker(env, settings, brain=transfer_on_request, services=services) as (client, backend):
        await return_then_transfer(client, raj)
        await cancel_then_transfer(client, sofia)
        [write] = (await client.state(raj)).completed_operations
        email_ref = f"email:{write.idempotency_key}"
        assert [m["to_email"] for m in _held(services, "email", "/messages", email_ref)] == [EMAIL]
        assert len(_tickets_of(services, raj)) == 1 and len(_tickets_of(services, sofia)) == 1
        assert backend.outbox_messages("main") == [] and backend.tickets("main") == []  # nothing in retail

        report = await build_erasure(env.client, with_services, backend).erase_customer(CUSTOMER, "operator-7")

    assert (report.records.outbox_deleted, report.records.tickets_deleted) == (1, 1)
    assert _held(services, "email", "/messages", email_ref) == []
    assert _tickets_of(services, raj) == []
    assert len(_tickets_of(services, sofia)) == 1  # another customer's stays
