"""Resets re-execute conversations; every outcome stays true and nothing applies twice.

An operator resets a conversation (Web UI "Reset") and the user sends their messages
again. The effect keys come from business identity (conversation, turn, order), so:
- a re-executed write gets the same idempotency key and the system of record returns the
  recorded result (with keys from ``workflow.uuid4()`` the reset run would mint a new key
  and apply twice);
- a refund whose write already applied is found in the ledger, not refused by a
  precondition its own write changed;
- a refund child still running when its parent is reset is waited for, not a failure;
- a different change confirmed at the same turn after the reset is a known non-application
  (the key holds another call), not an escalation of an "unknown" outcome;
- a write a supervisor approved and that applied is found in the ledger when the reset
  re-executes its yes, not parked for a second approval;
- a write whose approval expired to a human ticket is found in the ticketing system when the
  reset re-executes its yes, not parked for a supervisor who could approve it beside the human.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Optional

from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause

from tests.policy_fixtures import EMAIL, PENDING
from tests.resets import completed_tasks, message_points, reset_to, wait_for_turn
from tests.workflow_harness import order_details, running_worker

AUSTIN = {"address1": "1 Reset Road", "address2": "", "city": "Austin", "state": "TX", "country": "USA",
          "zip": "78701"}
DALLAS = {"address1": "2 Other Street", "address2": "", "city": "Dallas", "state": "TX", "country": "USA",
          "zip": "75201"}


def _brain(write: dict):
    def brain(view: dict, plan: Optional[dict] = None) -> dict:
        if view["customer"] is None:
            return {"kind": "tool_call", "tool": {"name": "find_user_id_by_email", "arguments": {"email": EMAIL}}}
        if view["turn"] < 2:
            return {"kind": "reply", "text": "How can I help?"}
        if PENDING not in view["orders"]:
            return {"kind": "tool_call", "tool": {"name": "get_order_details", "arguments": {"order_id": PENDING}}}
        if view["turn"] == 2:
            wanted = write(view)
            return {"kind": "tool_call", "tool": wanted}
        return {"kind": "reply", "text": "Done."}
    return brain


CANCEL = _brain(lambda view: {"name": "cancel_pending_order",
                              "arguments": {"order_id": PENDING, "reason": "no longer needed"}})
ADDRESS = _brain(lambda view: {"name": "modify_pending_order_address", "arguments": {
    "order_id": PENDING, **(DALLAS if "Dallas" in view["recent_turns"][-1]["text"] else AUSTIN)}})


async def test_reset_to_the_start_and_the_same_messages_apply_the_write_once(temporal_env, settings):
    async with running_worker(temporal_env, settings, brain=ADDRESS) as (client, backend):
        cid = await client.start_conversation(f"reset-start-{uuid.uuid4().hex[:6]}")

        async def converse():
            await client.send_message(cid, f"Hi, my email is {EMAIL}")
            assert "Austin" in (await client.send_message(cid, f"ship {PENDING} to Austin")).awaiting_confirmation
            await client.send_message(cid, "yes")
            [op] = (await client.state(cid)).completed_operations
            return op

        first = await converse()
        assert first.ok and first.idempotency_key == f"modify_pending_order_address:{PENDING}:{cid}.t2"
        await reset_to(temporal_env, f"support-{cid}", (await completed_tasks(temporal_env, f"support-{cid}"))[0])
        await wait_for_turn(client, cid, 0)
        again = await converse()
    assert again.idempotency_key == first.idempotency_key
    [entry] = [e for e in backend.ledger_entries("main") if e["tool"] == "modify_pending_order_address"]
    assert entry["idempotency_key"] == first.idempotency_key and backend.duplicate_writes("main") == 0


async def test_reset_after_an_applied_refund_finds_it_in_the_ledger(temporal_env, settings):
    async with running_worker(temporal_env, settings, brain=CANCEL) as (client, backend):
        cid = await client.start_conversation(f"reset-refund-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert (await client.send_message(cid, f"cancel {PENDING} please")).awaiting_confirmation
        await client.send_message(cid, "yes")
        point = (await message_points(temporal_env, f"support-{cid}"))[-1]  # the yes's: wipes it, keeps the proposal
        [first] = (await client.state(cid)).completed_operations
        assert first.ok and order_details(backend, PENDING)["status"] == "cancelled"

        await reset_to(temporal_env, f"support-{cid}", point)
        await wait_for_turn(client, cid, 2)
        await client.send_message(cid, "yes")
        [again] = (await client.state(cid)).completed_operations
    assert again.idempotency_key == first.idempotency_key
    assert again.ok and again.result == first.result  # the ledger's recorded success, not a refusal
    assert backend.duplicate_writes("main") == 0
    assert len([e for e in backend.ledger_entries("main") if e["tool"] == "cancel_pending_order"]) == 1
    # the first run found its key unused with a local look-up and ran no ledger activity; the
    # reset's run found it used and ran the activity that may move the money still owed
    first_run, reset_run = await _child_activities(temporal_env, first.child_workflow_id)
    assert first_run == ["run_write_tool"] and reset_run == ["find_recorded_write"]


async def _child_activities(temporal_env, child_id: str) -> list[list[str]]:
    """The activity types each run of the refund child ``child_id`` scheduled, oldest run first."""
    runs = [wf async for wf in temporal_env.client.list_workflows(f"WorkflowId = '{child_id}'")]
    found = []
    for run in sorted(runs, key=lambda r: r.start_time):
        history = await temporal_env.client.get_workflow_handle(child_id, run_id=run.run_id).fetch_history()
        found.append([e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
                      if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED])
    return found


async def test_reset_while_the_refund_child_runs_waits_for_it(temporal_env, settings, tmp_path):
    marker = tmp_path / "committed"
    async with running_worker(temporal_env, settings, brain=CANCEL, pause_after_write=(4.0, marker)) as (
            client, backend):
        cid = await client.start_conversation(f"reset-child-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert (await client.send_message(cid, f"cancel {PENDING} please")).awaiting_confirmation
        first_yes = asyncio.create_task(client.send_message(cid, "yes"))
        for _ in range(400):
            if marker.exists():
                break
            await asyncio.sleep(0.05)
        assert marker.exists()  # the child's write committed; its activity has not completed
        point = (await message_points(temporal_env, f"support-{cid}"))[-1]  # the yes's: wipes it
        await reset_to(temporal_env, f"support-{cid}", point)
        await asyncio.gather(first_yes, return_exceptions=True)  # that update belonged to the old run
        await wait_for_turn(client, cid, 2)
        reply = await asyncio.wait_for(client.send_message(cid, "yes"), 90)
        state = await client.state(cid)
        history = await temporal_env.client.get_workflow_handle(f"support-{cid}").fetch_history()
    assert reply.status == "active" and state.status.value == "active"
    [op] = state.completed_operations
    assert op.ok and backend.duplicate_writes("main") == 0
    failed = [e for e in history.events if e.event_type in (EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
                                                            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED)]
    # the reset itself is recorded as a failed workflow task with cause "reset"; nothing else failed
    assert [e.workflow_task_failed_event_attributes.cause for e in failed] == [
        WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW]


async def test_a_different_change_at_the_same_turn_after_a_reset_is_not_an_escalation(temporal_env, settings):
    async with running_worker(temporal_env, settings, brain=ADDRESS) as (client, backend):
        cid = await client.start_conversation(f"reset-other-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert "Austin" in (await client.send_message(cid, f"ship {PENDING} to Austin")).awaiting_confirmation
        point = (await message_points(temporal_env, f"support-{cid}"))[-1]  # turn 2's: keeps turn 1
        await client.send_message(cid, "yes")
        assert order_details(backend, PENDING)["address"]["city"] == "Austin"

        await reset_to(temporal_env, f"support-{cid}", point)
        await wait_for_turn(client, cid, 1)
        assert "Dallas" in (await client.send_message(cid, f"ship {PENDING} to Dallas")).awaiting_confirmation
        reply = await client.send_message(cid, "yes")
        state = await client.state(cid)
    assert reply.status == "active" and state.status.value == "active"  # not escalated: nothing is unknown
    [op] = state.completed_operations
    assert not op.ok and "different change" in op.result
    assert state.last_rejection().rule == "tool-error"
    assert order_details(backend, PENDING)["address"]["city"] == "Austin"  # the key's first call stands
    assert backend.duplicate_writes("main") == 0


async def test_reset_after_an_approved_and_applied_refund_does_not_ask_a_supervisor_again(temporal_env, settings):
    """The reset re-executes the yes of a cancel that a supervisor approved and that applied: the
    ledger is asked before the write is parked (``recorded_before_approval``), so it is recorded
    as applied and no second approval is opened (whose rejection would tell the user "nothing
    was changed")."""
    from starter.client.conversations import StatekeeperClient
    from tests.workflow_harness import until
    from workflows.domain.policy.approvals import ApprovalPolicy

    async with running_worker(temporal_env, settings, brain=CANCEL) as (_, backend):
        client = StatekeeperClient(temporal_env.client, settings.task_queue, settings.write_timeout_seconds,
                                   approvals=ApprovalPolicy())  # 826.70 is above the 500.00 threshold
        cid = await client.start_conversation(f"reset-approved-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert (await client.send_message(cid, f"cancel {PENDING} please")).awaiting_confirmation
        parked = await client.send_message(cid, "yes")
        point = (await message_points(temporal_env, f"support-{cid}"))[-1]  # the yes's: keeps the proposal
        assert parked.awaiting_approval
        await client.decide_approval(parked.awaiting_approval, "approve", "alice")

        async def applied() -> bool:
            return bool((await client.state(cid)).completed_operations)
        await until(applied, "the approved cancel to run")
        [first] = (await client.state(cid)).completed_operations
        assert first.ok and order_details(backend, PENDING)["status"] == "cancelled"

        await reset_to(temporal_env, f"support-{cid}", point)
        await wait_for_turn(client, cid, 2)
        again_reply = await client.send_message(cid, "yes")
        state = await client.state(cid)
    assert again_reply.awaiting_approval is None and "supervisor" not in again_reply.text
    assert state.pending_approvals() == [] and state.approvals == []
    [again] = state.completed_operations
    assert again.ok and again.idempotency_key == first.idempotency_key and again.result == first.result
    assert next(s for s in state.steps if s.name == "cancel_pending_order").status.value == "done"
    assert backend.duplicate_writes("main") == 0
    assert len([e for e in backend.ledger_entries("main") if e["tool"] == "cancel_pending_order"]) == 1


async def test_reset_after_an_expired_approval_leaves_the_write_with_the_human(temporal_env, settings):
    """The approval of a confirmed cancel runs out of time (a human ticket, "Nothing has been changed
    yet"); the reset re-executes the yes. The ticketing system is asked for the write's expiry ticket
    before it is parked (``handed_over``): it stays the human agent's, no second approval is opened
    (which a supervisor could approve, applying the cancel beside the human's ticket), nothing runs."""
    from starter.client.conversations import StatekeeperClient
    from tests.workflow_harness import until
    from workflows.conversation.approvals import HANDED_OVER
    from workflows.domain.policy.approvals import ApprovalPolicy, ApprovalStatus

    async with running_worker(temporal_env, settings, brain=CANCEL) as (_, backend):
        client = StatekeeperClient(temporal_env.client, settings.task_queue, settings.write_timeout_seconds,
                                   approvals=ApprovalPolicy(timeout_seconds=2.0))  # 826.70 > 500.00
        cid = await client.start_conversation(f"reset-expired-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert (await client.send_message(cid, f"cancel {PENDING} please")).awaiting_confirmation
        parked = await client.send_message(cid, "yes")
        point = (await message_points(temporal_env, f"support-{cid}"))[-1]
        assert parked.awaiting_approval

        async def expired() -> bool:
            state = await client.state(cid)
            return bool(state.approvals) and state.approvals[0].status is ApprovalStatus.EXPIRED \
                and "handed it to a human agent" in state.recent_turns[-1].text
        await until(expired, "the approval to expire to a human ticket")
        [ticket] = backend.tickets("main")

        await reset_to(temporal_env, f"support-{cid}", point)
        await wait_for_turn(client, cid, 2)
        again = await client.send_message(cid, "yes")
        state = await client.state(cid)
    assert again.awaiting_approval is None and "already with a human agent" in again.text
    assert "Nothing has been changed yet" in again.text
    assert state.approvals == [] and state.pending_approvals() == [] and state.completed_operations == []
    step = next(s for s in state.steps if s.name == "cancel_pending_order")
    assert step.status.value == "failed" and step.error == HANDED_OVER
    assert backend.tickets("main") == [ticket]  # the human's ticket, once
    assert backend.ledger_entries("main") == [] and order_details(backend, PENDING)["status"] == "pending"


def _transfer(view: dict, plan: Optional[dict] = None) -> dict:
    if view["customer"] is None:
        return {"kind": "tool_call", "tool": {"name": "find_user_id_by_email", "arguments": {"email": EMAIL}}}
    if view["turn"] < 2:
        return {"kind": "reply", "text": "How can I help?"}
    return {"kind": "transfer_to_human", "summary": "the customer asks for a human"}


async def test_reset_that_re_runs_a_transfer_finds_its_ticket_held(temporal_env, settings):
    """The transfer's ticket was opened in the first run; the re-run finds it held (the
    ``open_ticket`` activity answers False: not opened now) and transfers, not "I could not hand
    you over"."""
    from workflows.domain.replies import TRANSFERRED

    async with running_worker(temporal_env, settings, brain=_transfer) as (client, backend):
        cid = await client.start_conversation(f"reset-transfer-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert (await client.send_message(cid, "a human please")).text == TRANSFERRED
        await reset_to(temporal_env, f"support-{cid}", (await message_points(temporal_env, f"support-{cid}"))[-1])
        await wait_for_turn(client, cid, 1)
        again = await client.send_message(cid, "a human please")
    assert again.text == TRANSFERRED and again.status == "transferred"
    assert len(backend.tickets("main")) == 1
