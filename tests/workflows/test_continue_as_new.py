"""Continue-as-new: a conversation's state, a pending confirmation and concurrent messages
all carry over into the next run, and a confirmed write applies once.

One case continues after a fixed number of turns (``max_turns_per_run``) on the session's
dev server; the others use a dev server of their own that suggests continue-as-new after
a few events (``limit.historyCount.suggestContinueAsNew=20``). A real worker, SQLite.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment

from starter.runtime.connection import data_converter
from starter.dev.server import DEV_SERVER_STARTUP
from tests.conftest import temporal_cli
from tests.policy_fixtures import CUSTOMER, DELIVERED_2, EMAIL, PENDING
from tests.workflow_harness import running_worker
from workflows.options import SEARCH_ATTRIBUTES
from workflows.conversation.workflow import support_workflow_id


@pytest.fixture(scope="module")
async def can_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_local(
        dev_server_startup_timeout=DEV_SERVER_STARTUP,
        dev_server_existing_path=temporal_cli(),
        data_converter=data_converter(),
        search_attributes=list(SEARCH_ATTRIBUTES),
        dev_server_log_level="error",
        dev_server_extra_args=["--dynamic-config-value", "limit.historyCount.suggestContinueAsNew=20"],
    )
    try:
        yield env
    finally:
        await env.shutdown()


async def _runs(env, cid: str) -> set[str]:
    runs = set()
    async for wf in env.client.list_workflows(f"WorkflowId = '{support_workflow_id(cid)}'"):
        runs.add(wf.run_id)
    return runs


async def test_pending_confirmation_survives_continue_as_new_and_applies_once(can_env, settings):
    async with running_worker(can_env, settings) as (client, backend):
        cid = await client.start_conversation(f"can-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        r = await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        assert r.awaiting_confirmation
        before = await client.state(cid)
        op = before.pending_confirmation.operation_id
        runs_before = await _runs(can_env, cid)
        assert len(runs_before) >= 2, "no continue-as-new while the confirmation was pending; test is vacuous"
        await client.send_message(cid, "yes")
        after = await client.state(cid)
        [done] = [o for o in after.completed_operations if o.ok]
        assert done.operation_id == op
        assert len(await _runs(can_env, cid)) >= 2, "continue-as-new did not happen; test is vacuous"
        assert len(backend.ledger_entries("main")) == 1 and backend.duplicate_writes("main") == 0


async def test_concurrent_messages_across_continue_as_new_all_answered(can_env, settings):
    async with running_worker(can_env, settings) as (client, _):
        cid = await client.start_conversation(f"can-burst-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        for wave in range(4):
            replies = await asyncio.wait_for(
                asyncio.gather(*(client.send_message(cid, f"status of {PENDING}? ({wave}.{i})") for i in range(6))),
                60)
            assert len({r.turn for r in replies}) == 6
        state = await client.state(cid)
        assert state.turn == 1 + 4 * 6
        assert len(await _runs(can_env, cid)) >= 2


def _status(backend, order_id: str) -> str:
    import json

    return json.loads(backend.read("main", "get_order_details", {"order_id": order_id}))["status"]


async def test_state_survives_continue_as_new(temporal_env, settings):
    from tests.workflow_harness import NO_APPROVALS
    from workflows.domain.contracts import SupportInput
    from workflows.conversation.workflow import SupportWorkflow

    async with running_worker(temporal_env, settings) as (client, backend):
        handle = await temporal_env.client.start_workflow(
            SupportWorkflow.run, SupportInput(conversation_id="chat-can", max_turns_per_run=2, approvals=NO_APPROVALS),
            id="support-chat-can", task_queue=settings.task_queue)
        await client.send_message("chat-can", f"Hi, my email is {EMAIL}")
        await client.send_message("chat-can", f"What is the status of order {PENDING}?")
        # the run continued as new after two turns; the next message lands in the new run
        reply = await client.send_message("chat-can", f"Please cancel order {PENDING}, no longer needed")
        assert reply.awaiting_confirmation
        await client.send_message("chat-can", "yes")
        state = await client.state("chat-can")
        description = await temporal_env.client.get_workflow_handle("support-chat-can").describe()
        assert description.run_id != handle.first_execution_run_id
        assert state.turn == 4 and state.customer.user_id == CUSTOMER
        assert [f.turn for f in state.pinned_facts if f.kind == "order_id"] == [2]
        assert _status(backend, PENDING) == "cancelled" and len(backend.ledger_entries("main")) == 1


async def test_a_long_conversation_continues_across_runs_with_its_state_and_small_runs(temporal_env, settings):
    """A shorter version of the 1,000-turn conversation (``bench/turns/long.py`` runs
    the long one): 150 turns, continuing as new every 40, end with every turn counted, the
    customer, the write done at turn 3 (its step and its one ledger entry) and the order id
    the user gave at turn 4 intact, and every run far under Temporal's 10,000-event guidance
    (about 18 events per turn)."""
    from tests.workflow_harness import NO_APPROVALS
    from workflows.domain.contracts import SupportInput
    from workflows.conversation.workflow import SupportWorkflow

    cid, turns, per_run = f"long-{uuid.uuid4().hex[:6]}", 150, 40
    async with running_worker(temporal_env, settings) as (client, backend):
        await temporal_env.client.start_workflow(
            SupportWorkflow.run, SupportInput(conversation_id=cid, max_turns_per_run=per_run, approvals=NO_APPROVALS),
            id=support_workflow_id(cid), task_queue=settings.task_queue)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert (await client.send_message(cid, f"Please cancel order {PENDING}, no longer needed")).awaiting_confirmation
        await client.send_message(cid, "yes")
        await client.send_message(cid, f"What is the status of my other order {DELIVERED_2}?")
        for turn in range(5, turns + 1):
            reply = await client.send_message(cid, f"Where is order {DELIVERED_2}? (asking for the {turn}th time)")
            assert reply.turn == turn and reply.status == "active"
        state = await client.state(cid)
    assert state.turn == turns and state.customer.user_id == CUSTOMER
    assert [f.turn for f in state.pinned_facts if f.kind == "email"] == [1]
    assert [f.turn for f in state.pinned_facts if f.value == DELIVERED_2][0] == 4
    assert [(s.turn, s.status.value) for s in state.steps if s.operation_id] == [(2, "done")]
    assert [o.turn for o in state.completed_operations if o.ok] == [3]
    assert _status(backend, PENDING) == "cancelled" and len(backend.ledger_entries("main")) == 1
    assert DELIVERED_2 in state.orders
    runs = await _runs(temporal_env, cid)
    assert len(runs) == turns // per_run + 1
    for run_id in runs:
        history = await temporal_env.client.get_workflow_handle(support_workflow_id(cid), run_id=run_id).fetch_history()
        assert len(history.events) < 25 * per_run  # 10,000 events would be 250 per turn
