"""Where a process publishes its business status: ``ProcessStatus``, never ``Status`` (a custom
attribute of that name takes over the Web UI list's own Status column). A run of 1.0.0, which
publishes only ``Status``, is still found by the lists' ``?status=`` while the namespace has
``Status`` registered (a server upgraded from 1.0.0), and its item reads that status."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from temporalio import workflow
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from tests.policy_fixtures import DELIVERED
from tests.workflow_harness import running_worker, two_orders_brain
from workflows.options import LEGACY_STATUS, ORDER_IDS, STATUS


@workflow.defn(name="SupportWorkflow")
class ReleasedConversation:
    """Stands in for a conversation of 1.0.0: it carries ``Status`` only, as those runs do."""

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False, timeout=timedelta(minutes=5))


async def _register_legacy_status(client) -> None:
    try:
        await client.operator_service.add_search_attributes(AddSearchAttributesRequest(
            namespace=client.namespace,
            search_attributes={LEGACY_STATUS.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD}))
    except RPCError as err:  # another test registered it already
        assert "already" in err.message.lower(), err.message


async def _start_released(client, cid: str, queue: str, seconds: float = 15.0):
    """Start the stand-in run; the server takes a moment to use a newly registered attribute."""
    for _ in range(int(seconds / 0.5)):
        try:
            return await client.start_workflow(
                ReleasedConversation.run, id=f"support-{cid}", task_queue=queue,
                search_attributes=TypedSearchAttributes([SearchAttributePair(LEGACY_STATUS, "active"),
                                                         SearchAttributePair(ORDER_IDS, [DELIVERED])]))
        except RPCError as err:
            if "no mapping" not in err.message:
                raise
            await asyncio.sleep(0.5)
    raise AssertionError(f"the server did not take {LEGACY_STATUS.name} within {seconds} s")


async def _eventually(read, expected, seconds: float = 15.0):
    found = None
    for _ in range(int(seconds / 0.2)):
        found = await read()
        if found == expected:
            return found
        await asyncio.sleep(0.2)
    return found


async def test_a_conversation_publishes_process_status_and_not_status(temporal_env, settings):
    async with running_worker(temporal_env, settings, brain=two_orders_brain()) as (client, _):
        cid = await client.start_conversation(f"status-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Where is {DELIVERED}?")
        attributes = (await temporal_env.client.get_workflow_handle(f"support-{cid}").describe()).typed_search_attributes
        assert attributes.get(STATUS) == "active"
        assert attributes.get(LEGACY_STATUS) is None


async def test_a_run_of_1_0_that_holds_only_status_is_still_listed_by_its_status(temporal_env, settings):
    await _register_legacy_status(temporal_env.client)
    queue = f"released-{uuid.uuid4().hex[:6]}"
    cid = f"released-{uuid.uuid4().hex[:6]}"
    async with Worker(temporal_env.client, task_queue=queue, workflows=[ReleasedConversation],
                      workflow_runner=UnsandboxedWorkflowRunner()), \
            running_worker(temporal_env, settings, brain=two_orders_brain()) as (client, _):
        handle = await _start_released(temporal_env.client, cid, queue)
        try:
            async def listed(status=None):
                page = await client.list_conversations(order_id=DELIVERED, status=status, limit=100)
                return [item.status for item in page.items if item.conversation_id == cid]

            assert await _eventually(lambda: listed("active"), ["active"]) == ["active"]
            assert await _eventually(listed, ["active"]) == ["active"]
            assert await listed("ended") == []
        finally:
            await handle.terminate("test over")
