"""SupportWorkflow on a real Temporal dev server, with a real worker and SQLite database.

The model is the only part faked, at its boundary (the Messages API): the offline
stand-in, or a test brain that misbehaves on purpose.
"""

from __future__ import annotations

import asyncio
import gc

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata

from starter.client.conversations import ConversationError
from systems.model.server import offline_brain
from tests.policy_fixtures import (
    CUSTOMER,
    DELIVERED,
    EMAIL,
    PENDING,
    other_customer_order,
)
from tests.workflow_harness import running_worker
from workflows.domain.contracts import SupportInput
from workflows.options import CUSTOMER_ID, ORDER_IDS, STEP
from workflows.domain.pseudonym import customer_pseudonym
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id


async def test_chat_cancels_an_order_after_explicit_yes(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        cid = await client.start_conversation("chat-cancel")
        reply = await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert reply.status == "active"
        reply = await client.send_message(cid, f"Please cancel order {PENDING}, I no longer need it")
        assert reply.awaiting_confirmation and PENDING in reply.awaiting_confirmation
        assert "pending" == _status(backend, PENDING)  # nothing written before the yes
        # what an operator sees on the Web UI's "User Metadata" tab (current details)
        metadata = await temporal_env.client.get_workflow_handle(f"support-{cid}").query(
            "__temporal_workflow_metadata", result_type=WorkflowMetadata)
        assert "**Current step:** awaiting_confirmation" in metadata.current_details
        assert f"**Awaiting confirmation:** `cancel_pending_order` — order_id: {PENDING}" in metadata.current_details
        reply = await client.send_message(cid, "yes")
        assert _status(backend, PENDING) == "cancelled"
        state = await client.state(cid)
        assert state.customer.user_id == CUSTOMER
        [op] = state.completed_operations
        assert op.ok and op.idempotency_key == f"cancel_pending_order:{PENDING}:{op.operation_id}"
        assert op.child_workflow_id and op.child_workflow_id.startswith("refund-main-")
        assert [s.status.value for s in state.steps] == ["done"]
        ledger = backend.ledger_entries("main")
        assert len(ledger) == 1 and backend.duplicate_writes("main") == 0
        # operators find the conversation and its refund by business identity
        description = await temporal_env.client.get_workflow_handle(f"support-{cid}").describe()
        attrs = description.typed_search_attributes
        pseudonym = customer_pseudonym(CUSTOMER, settings.pseudonym_secret())
        assert attrs.get(CUSTOMER_ID) == pseudonym and PENDING in attrs.get(ORDER_IDS) and attrs.get(STEP) == "active"
        child = await temporal_env.client.get_workflow_handle(op.child_workflow_id).describe()
        assert child.typed_search_attributes.get(STEP) == "done"
        assert child.typed_search_attributes.get(ORDER_IDS) == [PENDING]
        assert child.typed_search_attributes.get(CUSTOMER_ID) == pseudonym


async def test_user_no_leaves_the_data_unchanged(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        before = backend.hash("main")
        cid = await client.start_conversation("chat-no")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        reply = await client.send_message(cid, f"cancel {PENDING} please, ordered by mistake")
        assert reply.awaiting_confirmation
        await client.send_message(cid, "no")
        state = await client.state(cid)
        assert state.pending_confirmation is None
        assert any(r.rule == "user-declined" for r in state.rejections)
        assert [s.status.value for s in state.steps] == ["cancelled"]
        assert backend.hash("main") == before and backend.ledger_entries("main") == []


async def test_bad_messages_are_rejected_with_a_clear_error_and_state_intact(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, _):
        cid = await client.start_conversation("chat-bad-input")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        before = await client.state(cid)
        with pytest.raises(ConversationError, match="empty"):
            await client.send_message(cid, "   ")
        with pytest.raises(ConversationError, match="limit is 8192 bytes"):
            await client.send_message(cid, "x" * (1024 * 1024))
        after = await client.state(cid)
        assert after.model_dump() == before.model_dump()


async def test_messages_after_the_conversation_finished_get_a_clear_error(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, _):
        cid = await client.start_conversation("chat-finished")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        await client.cancel(cid, "customer hung up")
        outcome = await asyncio.wait_for(client.outcome(cid), 20)
        assert outcome.status == "cancelled" and outcome.state.ended_reason == "customer hung up"
        with pytest.raises(ConversationError, match="finished|cancelled"):
            await client.send_message(cid, "hello again")
        with pytest.raises(ConversationError, match="does not exist"):
            await client.send_message("never-started", "hello")
        # starting it again is refused as finished, and the failed start leaves no unretrieved
        # future behind: asyncio logged "Future exception was never retrieved" with the SDK's
        # traceback (the API's log showed one per POST /conversations of a finished id)
        logged: list[str] = []
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: logged.append(context["message"]))
        try:
            with pytest.raises(ConversationError) as again:
                await client.start_conversation(cid)
            assert again.value.kind == "finished"
            del again  # its traceback holds the frames that hold the operation
            gc.collect()
        finally:
            loop.set_exception_handler(None)
        assert logged == []


async def test_malformed_model_output_becomes_a_rejection_fed_back_to_the_model(temporal_env, settings):
    seen: list[dict] = []

    def flaky_brain(view: dict, plan: dict | None = None) -> dict:
        seen.append(view)
        if len(seen) <= 3:  # the activity retries malformed output twice, then the workflow rejects
            return {"kind": "tool_call", "tool": {"name": "refund_everything", "arguments": {}}}
        return offline_brain(view, plan)

    async with running_worker(temporal_env, settings, brain=flaky_brain) as (client, _):
        cid = await client.start_conversation("chat-malformed")
        reply = await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert reply.status == "active"
        state = await client.state(cid)
        assert state.rejections[0].rule == "malformed-model-output"
        assert "refund_everything" in state.rejections[0].reason
        assert seen[3]["rejections"][-1]["rule"] == "malformed-model-output"
        assert state.customer is not None and state.customer.user_id == CUSTOMER


async def test_hostile_model_is_refused_and_nothing_is_written(temporal_env, settings):
    """A model that reads before authentication, reads another customer and writes to orders not
    read or not theirs is refused each time, with its clause; nothing is written. The email of
    the second message authenticates the customer by a state-driven read, before any proposal."""
    other_order, other_user = other_customer_order()
    proposals = [
        {"kind": "tool_call", "tool": {"name": "get_user_details", "arguments": {"user_id": CUSTOMER}}},
        {"kind": "reply", "text": "who are you?"},
        {"kind": "tool_call", "tool": {"name": "get_user_details", "arguments": {"user_id": CUSTOMER}}},
        {"kind": "tool_call", "tool": {"name": "get_user_details", "arguments": {"user_id": other_user}}},
        {"kind": "tool_call", "tool": {"name": "cancel_pending_order",
                                        "arguments": {"order_id": other_order, "reason": "no longer needed"}}},
        {"kind": "tool_call", "tool": {"name": "cancel_pending_order",
                                        "arguments": {"order_id": DELIVERED, "reason": "no longer needed"}}},
        {"kind": "reply", "text": "done trying"},
    ]

    def hostile_brain(view: dict, plan: dict | None = None) -> dict:
        return proposals.pop(0) if proposals else {"kind": "reply", "text": "nothing more"}

    async with running_worker(temporal_env, settings, brain=hostile_brain) as (client, backend):
        before = backend.hash("main")
        cid = await client.start_conversation("chat-hostile")
        assert (await client.send_message(cid, f"I am user {CUSTOMER}")).text == "who are you?"
        reply = await client.send_message(cid, f"my email is {EMAIL}")
        assert reply.text == "done trying"
        state = await client.state(cid)
        assert state.customer.user_id == CUSTOMER and state.customer.details_loaded
        assert [r.rule for r in state.rejections] == ["authenticate-first", "one-customer", "one-customer",
                                                     "check-status"]
        assert backend.hash("main") == before and backend.ledger_entries("main") == []


def _status(backend, order_id: str) -> str:
    import json

    return json.loads(backend.read("main", "get_order_details", {"order_id": order_id}))["status"]


async def test_read_failure_is_a_reply_not_a_failed_workflow(temporal_env, settings):
    # The client refuses an unknown store at start (tests/e2e/test_api_routes.py); a store
    # that is missing later (dropped, or a conversation started without the client) fails
    # reads, which must still be a reply.
    async with running_worker(temporal_env, settings) as (client, _):
        cid = "chat-no-store"
        await temporal_env.client.start_workflow(SupportWorkflow.run, SupportInput(conversation_id=cid,
                                                 store="no-such-store"), id=support_workflow_id(cid),
                                                 task_queue=settings.task_queue)
        reply = await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert reply.status == "active" and "can't reach our order system" in reply.text
        state = await client.state(cid)
        # worded from the failure's kind, never its exception name or text (workflows/failures.py)
        assert state.rejections[-1].rule == "tool-error" and state.rejections[-1].reason == (
            "find_user_id_by_email failed: the order system refused the request: it does not hold this store")
        assert state.customer is None and state.turn == 1


async def test_return_emails_the_customer_exactly_once(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        cid = await client.start_conversation("chat-return")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        reply = await client.send_message(cid, f"I want to return all items of order {DELIVERED}")
        assert reply.awaiting_confirmation and "Return from order" in reply.awaiting_confirmation
        await client.send_message(cid, "yes")
        assert _status(backend, DELIVERED) == "return requested"
        [message] = backend.outbox_messages("main")
        assert message["to_email"] == EMAIL and DELIVERED in message["subject"]
        assert len(backend.ledger_entries("main")) == 1


async def test_transfer_opens_one_ticket_and_ends_the_conversation(temporal_env, settings):
    def brain(view: dict, plan: dict | None = None) -> dict:
        if view["customer"] is None:
            return {"kind": "tool_call", "tool": {"name": "find_user_id_by_email", "arguments": {"email": EMAIL}}}
        return {"kind": "transfer_to_human", "summary": "customer wants to dispute a charge"}

    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = await client.start_conversation("chat-transfer")
        reply = await client.send_message(cid, f"I need a human, my email is {EMAIL}")
        assert reply.status == "transferred" and "TRANSFERRED" in reply.text
        [ticket] = backend.tickets("main")
        assert ticket["user_id"] == CUSTOMER and "dispute" in ticket["summary"]
        with pytest.raises(ConversationError) as err:
            await client.send_message(cid, "hello?")
        assert err.value.kind == "finished"
