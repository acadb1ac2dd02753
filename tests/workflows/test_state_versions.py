"""A conversation started with a saved state (``SupportInput.state``, JSON of any schema
version) on a real Temporal dev server and worker: an older state is migrated and runs with
its data intact, through continue-as-new; a state this code cannot load fails the run at
once, non-retryably, with a typed error whose message says why (what the Web UI shows),
and every client call on that conversation reports it as ``state_incompatible``; the run's one
public event is ``conversation.ended`` with status ``failed`` and rule ``state-incompatible``.

Unread, a schema version would let such a state be accepted and silently lose data (an
unknown field dropped), run a version 99 as if current, and fail the workflow task forever on
a wrongly typed field while the client reported "unavailable".
"""

from __future__ import annotations

import asyncio
import uuid
from decimal import Decimal
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from activities.store.journal import JournalStore
from starter.client.errors import ConversationError
from tests.core.test_migrations import as_v1, current_state
from tests.policy_fixtures import DELIVERED, PENDING
from tests.workflow_harness import ListBrain, reply, running_worker
from workflows.domain.contracts import SupportInput
from workflows.domain.errors import ErrorType
from workflows.domain.state import SCHEMA_VERSION
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id

DEADLINE = 20.0


def v1_state(cid: str) -> dict[str, Any]:
    """What v0.1.0 saved for a conversation (``schema_version`` 1, money as floats): the
    customer authenticated, three orders and their products read, one completed write."""
    state = current_state()
    state.conversation_id = cid
    return as_v1(state.model_dump(mode="json"))


async def refused(call) -> ConversationError:
    with pytest.raises(ConversationError) as caught:
        await asyncio.wait_for(call, DEADLINE)
    return caught.value


async def assert_failed_with(env, cid: str, reason: str) -> None:
    """The run failed (not its workflow task: no retries) with a non-retryable
    StateIncompatible error whose message holds ``reason``."""
    handle = env.client.get_workflow_handle(support_workflow_id(cid))
    with pytest.raises(WorkflowFailureError) as caught:
        await asyncio.wait_for(handle.result(), DEADLINE)
    failure = caught.value.cause
    assert isinstance(failure, ApplicationError) and failure.type == ErrorType.STATE_INCOMPATIBLE.value
    assert failure.non_retryable
    assert failure.message.startswith("the conversation's saved state cannot be loaded: ") and reason in failure.message
    assert "Traceback" not in failure.message and "ValidationError" not in failure.message
    assert (await handle.describe()).status == WorkflowExecutionStatus.FAILED
    events = [event.event_type async for event in handle.fetch_history_events()]
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in events
    assert events[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED


async def assert_every_call_says_why(client, cid: str, reason: str) -> None:
    for call in (client.state(cid), client.send_message(cid, "hello?"), client.cancel(cid, "stop"),
                 client.start_conversation(cid), client.start_with_message("hi", cid)):
        err = await refused(call)
        assert err.kind == "state_incompatible", (err.kind, str(err))
        assert reason in str(err) and str(err).startswith("the conversation's saved state cannot be loaded")


async def test_a_v1_state_runs_with_its_data_intact_through_continue_as_new(temporal_env, settings):
    brain = ListBrain([reply("Your orders are as you saw them.")])
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = f"state-v1-{uuid.uuid4().hex[:6]}"
        saved = v1_state(cid)
        handle = await temporal_env.client.start_workflow(
            SupportWorkflow.run, SupportInput(conversation_id=cid, state=saved, max_turns_per_run=1),
            id=support_workflow_id(cid), task_queue=settings.task_queue)
        loaded = await client.state(cid)
        assert loaded.schema_version == SCHEMA_VERSION == 3
        assert loaded == current_state().model_copy(update={"conversation_id": cid})
        assert len(loaded.completed_operations) == 1 and len(loaded.pinned_facts) == len(saved["pinned_facts"]) > 0
        assert loaded.orders[PENDING].total == Decimal(str(saved["orders"][PENDING]["total"])).quantize(Decimal("0.01"))

        answer = await client.send_message(cid, "How are my orders?")  # this turn continues as new
        assert answer.text == "Your orders are as you saw them."
        # the model's view holds money as cent text
        view_order = brain.views[-1]["orders"][DELIVERED]
        assert view_order["total"] == f"{saved['orders'][DELIVERED]['total']:.2f}"
        assert all(isinstance(item["price"], str) for item in view_order["items"])

        latest = temporal_env.client.get_workflow_handle(support_workflow_id(cid))
        assert (await latest.describe()).run_id != handle.first_execution_run_id, "no continue-as-new: vacuous"
        after = await client.state(cid)
        assert after.turn == loaded.turn + 1
        assert after.orders == loaded.orders
        # the v1 state never read the customer's memory: the run after it reads it once (nothing is kept)
        assert loaded.customer.memory is None and after.customer.memory == []
        assert after.customer.model_copy(update={"memory": None}) == loaded.customer
        assert after.completed_operations == loaded.completed_operations
        assert after.pinned_facts[:len(loaded.pinned_facts)] == loaded.pinned_facts


async def test_the_offline_model_reads_money_from_a_migrated_state(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        cid = await client.start_conversation(f"state-offline-{uuid.uuid4().hex[:6]}", state=v1_state("x"))
        answer = await client.send_message(cid, f"What is the status of order {DELIVERED}?")
        total = (await client.state(cid)).orders[DELIVERED].total
        assert f"Total ${total}" in answer.text, answer.text


async def test_a_state_from_a_newer_version_fails_the_run_and_every_call_says_so(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        cid = f"state-v99-{uuid.uuid4().hex[:6]}"
        newer = dict(current_state().model_dump(mode="json"), conversation_id=cid, schema_version=99)
        err = await refused(client.start_conversation(cid, state=newer))
        reason = "saved by a newer version (99) than this worker understands (3)"
        assert err.kind == "state_incompatible" and reason in str(err)
        await assert_failed_with(temporal_env, cid, reason)
        await assert_every_call_says_why(client, cid, reason)
        assert backend.ledger_entries("main") == []  # nothing ran
        # the run's one event says it ended failed, and why, in a word
        events = await asyncio.to_thread(JournalStore(settings.resolved_journal_url()).events, cid)
        assert [(e.type, e.sequence, e.data) for e in events] == [
            ("conversation.ended", 1, {"conversation_id": cid, "status": "failed", "rule": "state-incompatible"})]


async def test_a_wrongly_typed_field_fails_the_run_naming_the_field(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        cid = f"state-typed-{uuid.uuid4().hex[:6]}"
        broken = v1_state(cid)
        broken["orders"][PENDING]["total"] = "a lot"
        broken["turn"] = "three"
        # started directly (as an operator's script would): decoding the input does not fail the task
        await temporal_env.client.start_workflow(SupportWorkflow.run, SupportInput(conversation_id=cid, state=broken),
                                                 id=support_workflow_id(cid), task_queue=settings.task_queue)
        reason = f"field orders.{PENDING}.total: an amount of money given as text must be a plain decimal"
        await assert_failed_with(temporal_env, cid, reason)
        await assert_failed_with(temporal_env, cid, "field turn: Input should be a valid integer")
        await assert_every_call_says_why(client, cid, reason)


async def test_a_renamed_field_fails_the_run_instead_of_losing_data(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        cid = f"state-renamed-{uuid.uuid4().hex[:6]}"
        renamed = v1_state(cid)
        renamed["operations_completed"] = renamed.pop("completed_operations")
        err = await refused(client.start_with_message("hello", cid, state=renamed))
        reason = "field operations_completed: not a field of schema version 3"
        assert err.kind == "state_incompatible" and reason in str(err)
        await assert_failed_with(temporal_env, cid, reason)
