"""Effect keys come from business identity and survive a workflow reset.

A conversation changes an order's address; then an operator resets the workflow to its
first workflow task and the user sends the same messages again. The re-executed write
gets the same idempotency key (conversation id, order, the turn that proposed it), so
the system of record returns the recorded result instead of applying it a second time.
With keys from ``workflow.uuid4()`` the reset run would mint a new key and apply twice.

How the keys are derived is checked without a server in tests/core/test_effect_keys.py.
"""

from __future__ import annotations

import asyncio
import uuid

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, ResetReapplyExcludeType
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest

from tests.policy_fixtures import EMAIL, PENDING
from tests.workflow_harness import running_worker

NEW_ADDRESS = {"address1": "1 Reset Road", "address2": "", "city": "Austin", "state": "TX",
               "country": "USA", "zip": "78701"}


def address_brain(view: dict, plan: dict | None = None) -> dict:
    """Authenticate, read the order, propose one address change, then reply: a pure
    function of the state view, so the reset run proposes exactly the same."""
    if view["customer"] is None:
        return {"kind": "tool_call", "tool": {"name": "find_user_id_by_email", "arguments": {"email": EMAIL}}}
    if view["turn"] < 2:
        return {"kind": "reply", "text": "How can I help?"}
    if PENDING not in view["orders"]:
        return {"kind": "tool_call", "tool": {"name": "get_order_details", "arguments": {"order_id": PENDING}}}
    if view["turn"] == 2:
        return {"kind": "tool_call", "tool": {"name": "modify_pending_order_address",
                                              "arguments": {"order_id": PENDING, **NEW_ADDRESS}}}
    return {"kind": "reply", "text": "Done."}


async def _conversation(client, cid: str):
    await client.send_message(cid, f"Hi, my email is {EMAIL}")
    reply = await client.send_message(cid, f"Please ship order {PENDING} to 1 Reset Road, Austin")
    assert reply.awaiting_confirmation and "1 Reset Road" in reply.awaiting_confirmation
    return await client.send_message(cid, "yes")


async def test_reset_and_re_executed_write_applies_once(temporal_env, settings):
    async with running_worker(temporal_env, settings, brain=address_brain) as (client, backend):
        cid = await client.start_conversation(f"reset-{uuid.uuid4().hex[:6]}")
        await _conversation(client, cid)
        first = await client.state(cid)
        [op] = first.completed_operations
        assert op.ok and op.idempotency_key == f"modify_pending_order_address:{PENDING}:{cid}.t2"

        handle = temporal_env.client.get_workflow_handle(f"support-{cid}")
        history = await handle.fetch_history()
        first_task = next(e.event_id for e in history.events
                          if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
        await temporal_env.client.workflow_service.reset_workflow_execution(ResetWorkflowExecutionRequest(
            namespace=temporal_env.client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=f"support-{cid}"),
            reason="test: re-execute the conversation", workflow_task_finish_event_id=first_task,
            request_id=str(uuid.uuid4()),
            reset_reapply_exclude_types=[ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_UPDATE,
                                         ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL],
        ))
        for _ in range(100):  # the reset run starts from an empty state
            if (await client.state(cid)).turn == 0:
                break
            await asyncio.sleep(0.1)
        assert (await client.state(cid)).turn == 0

        await _conversation(client, cid)
        again = await client.state(cid)
        [op_again] = again.completed_operations
        assert op_again.idempotency_key == op.idempotency_key
        [entry] = [e for e in backend.ledger_entries("main") if e["tool"] == "modify_pending_order_address"]
        assert entry["idempotency_key"] == op.idempotency_key
        assert backend.duplicate_writes("main") == 0
