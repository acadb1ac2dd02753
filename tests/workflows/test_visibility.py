"""What operators see in the Web UI, on a real dev server and worker:
search attributes hold the customer's keyed pseudonym and every order the conversation
touched, and no personal data reaches current details, activity summaries or search
attributes (scanned in the history and the metadata query of both workflows)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

from google.protobuf.json_format import MessageToDict
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowHandle

from starter.runtime.connection import data_converter
from tests.policy_fixtures import CARD, CUSTOMER, DELIVERED, EMAIL, GIFT, PENDING
from tests.workflow_harness import (
    ListBrain,
    Script,
    Think,
    call,
    conversation_over_runs,
    reply,
    running_worker,
    two_orders_brain,
    until,
)
from workflows.options import CUSTOMER_ID, ORDER_IDS, STATUS, STEP
from workflows.domain.pseudonym import customer_pseudonym

PERSONAL = (EMAIL, CUSTOMER, "Sanchez", "Sunset Drive", "92147", "San Diego", CARD, GIFT)
"""The customer's email, id (it holds the name), last name, address, zip and payment ids."""


async def operator_view(handle: WorkflowHandle) -> str:
    """Everything an operator sees of a run, as text: current details (metadata query),
    the user metadata of every history event (activity summaries, details; decrypted, as
    the Web UI shows them through the codec server) and every
    search attribute the run set."""
    metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    seen = [metadata.current_details, json.dumps(MessageToDict(metadata.definition))]
    codec = data_converter().payload_codec  # summaries are encrypted; the Web UI decodes them as here
    async for event in handle.fetch_history_events():
        as_dict = MessageToDict(event)
        for field in ("summary", "details"):
            if event.HasField("user_metadata") and event.user_metadata.HasField(field):
                [plain] = await codec.decode([getattr(event.user_metadata, field)])
                seen.append(plain.data.decode())
        for attributes in as_dict.values():
            if isinstance(attributes, dict) and "searchAttributes" in attributes:
                seen.append(json.dumps(attributes["searchAttributes"]))
    description = await handle.describe()
    seen.append(json.dumps({k.name: v for k, v in description.typed_search_attributes}, default=str))
    return "\n".join(seen)


def decoded(view: str) -> str:
    """Payload data in history JSON is base64: decode what decodes, keep the rest."""
    import base64
    import re

    def one(match: re.Match) -> str:
        try:
            return base64.b64decode(match.group(1)).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return match.group(0)

    return re.sub(r'"data": "([A-Za-z0-9+/=]+)"', one, view)


async def attributes_when(handle: WorkflowHandle, ready, timeout_seconds: float = 20.0):
    """The run's search attributes once ``ready(attrs)`` holds (visibility is eventually consistent)."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        attrs = (await handle.describe()).typed_search_attributes
        if ready(attrs) or time.monotonic() > deadline:
            return attrs
        await asyncio.sleep(0.2)


async def test_operators_find_a_conversation_by_pseudonym_and_every_order_it_touched(temporal_env, settings):
    brain = ListBrain([
        call("find_user_id_by_email", email=EMAIL),
        call("get_user_details", user_id=CUSTOMER),
        call("get_order_details", order_id=PENDING),
        call("get_order_details", order_id=DELIVERED),
        call("get_order_details", order_id="#W0000000"),  # not found: the process touched no such order
        reply("Both orders are here."),
        call("cancel_pending_order", order_id=PENDING, reason="no longer needed"),
        reply("Cancelled."),
    ])
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = await client.start_conversation(f"ops-{uuid.uuid4().hex[:6]}")
        handle = temporal_env.client.get_workflow_handle(f"support-{cid}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}; where are {PENDING} and {DELIVERED}?")
        pseudonym = customer_pseudonym(CUSTOMER, settings.pseudonym_secret())
        attrs = await attributes_when(handle, lambda a: a.get(CUSTOMER_ID) is not None)
        assert attrs.get(CUSTOMER_ID) == pseudonym != CUSTOMER and CUSTOMER not in pseudonym
        assert attrs.get(ORDER_IDS) == [PENDING, DELIVERED]
        assert attrs.get(STATUS) == "active" and attrs.get(STEP) == "active"

        awaiting = await client.send_message(cid, f"cancel {PENDING} please, I no longer need it")
        assert awaiting.awaiting_confirmation
        metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        details = metadata.current_details
        assert "**Current step:** awaiting_confirmation" in details
        assert f"`cancel_pending_order` — order_id: {PENDING}, reason: no longer needed" in details
        assert f"**Customer:** `{pseudonym}`" in details and f"`{DELIVERED}`" in details

        await client.send_message(cid, "yes")
        state = await client.state(cid)
        [operation] = state.completed_operations
        assert operation.ok
        # the later write never drops an order read earlier
        attrs = await attributes_when(handle, lambda a: a.get(STEP) == "active")
        assert attrs.get(ORDER_IDS) == [PENDING, DELIVERED] and attrs.get(CUSTOMER_ID) == pseudonym

        child = temporal_env.client.get_workflow_handle(operation.child_workflow_id)
        child_attrs = (await child.describe()).typed_search_attributes
        assert child_attrs.get(CUSTOMER_ID) == pseudonym and child_attrs.get(ORDER_IDS) == [PENDING]
        assert child_attrs.get(STATUS) == "applied" and child_attrs.get(STEP) == "done"
        child_view = await operator_view(child)
        assert f"**Refund** on order `{PENDING}` — status **applied**" in child_view
        order_total = sum(item["price"] for item in json.loads(
            backend.read("main", "get_order_details", {"order_id": PENDING}))["items"])
        assert f"**Amount:** {order_total:.2f}" in child_view
        assert "**Outcome:** applied" in child_view
        assert "The refund's current step" in child_view  # the query's description, in the run's metadata

        key = settings.pseudonym_secret()
        for run in (handle, child):  # the key never enters a workflow: not in any input, result or event
            assert key not in decoded((await run.fetch_history()).to_json())
        for view in (await operator_view(handle), child_view):
            text = decoded(view)
            assert "cancel_pending_order" in text  # the scan sees the summaries and details...
            leaked = [p for p in PERSONAL if p.lower() in text.lower()]
            assert leaked == []  # ...and no personal data in them


async def test_the_scan_catches_personal_data_in_a_summary(temporal_env, settings):
    """The leak check above can fail: the same scan finds an email put in a run's summary."""
    async with running_worker(temporal_env, settings) as (client, _):
        from workflows.domain.contracts import SupportInput
        from workflows.conversation.workflow import SupportWorkflow

        cid = f"ops-probe-{uuid.uuid4().hex[:6]}"
        handle = await temporal_env.client.start_workflow(
            SupportWorkflow.run, SupportInput(conversation_id=cid), id=f"support-{cid}",
            task_queue=settings.task_queue, static_summary=f"customer {EMAIL}")
        await attributes_when(handle, lambda a: a.get(STATUS) == "active")
        assert EMAIL in decoded(await operator_view(handle))
        await client.cancel(cid, "probe done")


async def test_attributes_carry_over_continue_as_new_and_keep_accumulating(temporal_env, settings):
    async with running_worker(temporal_env, settings, brain=two_orders_brain()) as (client, _):
        cid = await conversation_over_runs(temporal_env.client, settings, client, "ops-can")
        latest = temporal_env.client.get_workflow_handle(f"support-{cid}")
        attrs = await attributes_when(latest, lambda a: a.get(ORDER_IDS) == [DELIVERED, PENDING])
        assert attrs.get(ORDER_IDS) == [DELIVERED, PENDING]  # in the order touched, across runs
        assert attrs.get(CUSTOMER_ID) == customer_pseudonym(CUSTOMER, settings.pseudonym_secret())
        assert latest.id == f"support-{cid}"


async def test_a_refund_shows_its_pending_approval_then_the_approver_and_outcome(temporal_env, settings):
    from tests.workflows.test_refund_approvals import CANCEL, pending_approval, start

    async with running_worker(temporal_env, settings) as (client, _):
        handle, operation, _key = await start(temporal_env.client, settings, CANCEL)
        approval = await pending_approval(handle)
        waiting = await operator_view(handle)
        assert f"**Refund** on order `{PENDING}` — status **running**" in waiting
        assert f"**Operation:** `cancel_pending_order` — order_id: {PENDING}, reason: no longer needed" in waiting
        assert "**Step:** awaiting_approval" in waiting and "**Amount:** 826.70" in waiting
        assert f"**Approval pending:** `{approval.approval_id}` — amount 826.70" in waiting
        attrs = (await handle.describe()).typed_search_attributes
        assert attrs.get(STATUS) == "running" and attrs.get(STEP) == "awaiting_approval"

        await client.decide_approval(approval.approval_id, "approve", "alice")
        assert (await handle.result()).ok
        done = await operator_view(handle)
        assert "**Approval approved** by `alice` at " in done and "**Outcome:** applied" in done
        assert (await handle.describe()).typed_search_attributes.get(STATUS) == "applied"
        leaked = [p for p in PERSONAL if p.lower() in decoded(done).lower()]
        assert leaked == []


async def test_the_details_say_what_the_run_does_while_the_model_call_runs(temporal_env, settings):
    """The transition that asks the model records an event; the view it refreshes says so
    before the call is made, and the next event (the reply) clears it."""
    async with running_worker(temporal_env, settings, brain=Script([Think(4.0, reply("Hello there."))])) as (
            client, _):
        cid = await client.start_conversation(f"vis-doing-{uuid.uuid4().hex[:6]}")
        handle = temporal_env.client.get_workflow_handle(f"support-{cid}")

        async def details() -> str:
            metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
            return metadata.current_details

        sending = asyncio.create_task(client.send_message(cid, "Hello"))

        async def proposing() -> bool:
            return "**Current step:** active (model proposing the next action)" in await details()
        await until(proposing, "the details while the model call runs")
        assert (await sending).text == "Hello there."
        assert "**Current step:** active\n" in await details() + "\n"
