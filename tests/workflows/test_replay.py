"""Determinism: the histories of a real conversation and of the refunds it ran (on a real
Temporal dev server, real worker, SQLite) replay without error in the ``Replayer`` with
the worker's own sandbox runner.
"""

from __future__ import annotations

import uuid

from temporalio.worker import Replayer

from starter.runtime.connection import data_converter
from tests.policy_fixtures import DELIVERED, EMAIL, PENDING
from tests.workflow_harness import running_worker
from starter.runtime.worker import workflow_runner
from workflows.refund.workflow import RefundWorkflow
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id


async def test_replay_of_real_histories_is_deterministic(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        cid = await client.start_conversation(f"replay-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        await client.send_message(cid, f"Please return everything from {DELIVERED}")
        await client.send_message(cid, "yes")
        await client.send_message(cid, f"cancel {PENDING}, ordered by mistake")
        await client.send_message(cid, "yes")
        state = await client.state(cid)
        assert len([op for op in state.completed_operations if op.ok]) == 2
        await client.cancel(cid, "done")
        await client.outcome(cid)
        histories = [await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).fetch_history()]
        for op in state.completed_operations:
            histories.append(await temporal_env.client.get_workflow_handle(op.child_workflow_id).fetch_history())
    replayer = Replayer(workflows=[SupportWorkflow, RefundWorkflow], data_converter=data_converter(),
                        workflow_runner=workflow_runner())
    for history in histories:
        await replayer.replay_workflow(history)
