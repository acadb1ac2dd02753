"""Supervisor approvals inside a conversation: a confirmed refund-type write above the
threshold waits for a supervisor; the user is told at once and told the decision;
approve runs it once, reject writes nothing, expiry hands it to a human; a decision on
another operation, a second decision, or one after a cancel is refused.

SupportWorkflow on a real Temporal dev server with a real worker, SQLite, and the offline
stand-in model (its rules brain understands these plain requests).
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from starter.client.conversations import ConversationError, StatekeeperClient
from tests.policy_fixtures import EMAIL, PENDING
from tests.workflow_harness import order_details, running_worker, until
from workflows.domain.policy.approvals import ApprovalPolicy, ApprovalStatus
from workflows.domain.state import Role, StepStatus

SUPERVISOR = "sup-ana"


async def _awaiting_approval(client: StatekeeperClient, name: str) -> tuple[str, str]:
    """A conversation whose confirmed cancel of PENDING (826.70, above 500.00) awaits a supervisor."""
    cid = await client.start_conversation(f"{name}-{uuid.uuid4().hex[:6]}")
    await client.send_message(cid, f"Hi, my email is {EMAIL}")
    shown = await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
    assert shown.awaiting_confirmation
    told = await client.send_message(cid, "yes")
    assert told.awaiting_approval and "supervisor's approval" in told.text
    return cid, told.awaiting_approval


async def test_a_write_above_the_threshold_waits_and_runs_once_approved(temporal_env, settings):
    async with running_worker(temporal_env, settings, approvals=ApprovalPolicy()) as (client, backend):
        cid, approval_id = await _awaiting_approval(client, "approve")
        state = await client.state(cid)
        [approval] = state.approvals
        assert approval.status is ApprovalStatus.PENDING and str(approval.amount) == "826.70"
        assert [s.status for s in state.steps] == [StepStatus.AWAITING_APPROVAL]
        assert backend.ledger_entries("main") == [] and order_details(backend, PENDING)["status"] == "pending"

        decided = await client.decide_approval(approval_id, "approve", SUPERVISOR, note="checked")
        assert decided.status is ApprovalStatus.APPROVED and decided.approver == SUPERVISOR
        await until(lambda: len(backend.ledger_entries("main")) == 1, "the approved write")
        # the step is done a workflow task before the user's notice is appended; wait for the notice
        await until(lambda: _told_latest(client, cid, "A supervisor approved"), "the user to be told")
        state = await client.state(cid)
        assert [s.status for s in state.steps] == [StepStatus.DONE]
        assert state.approvals[0].approver == SUPERVISOR and state.approvals[0].decided_at is not None
        assert order_details(backend, PENDING)["status"] == "cancelled"
        told = [t.text for t in state.recent_turns if t.role is Role.ASSISTANT][-1]
        assert told.startswith("A supervisor approved your request, and it is done")
        with pytest.raises(ConversationError) as second:
            await client.decide_approval(approval_id, "reject", "sup-bob")
        assert second.value.kind == "approval_refused" and "already approved" in str(second.value)
        nxt = await client.send_message(cid, "Thanks!")
        assert nxt.text.startswith("A supervisor approved your request") and nxt.awaiting_approval is None
        assert len(backend.ledger_entries("main")) == 1 and backend.duplicate_writes("main") == 0


async def test_a_rejected_write_changes_nothing_and_the_user_is_told(temporal_env, settings):
    async with running_worker(temporal_env, settings, approvals=ApprovalPolicy()) as (client, backend):
        cid, approval_id = await _awaiting_approval(client, "reject")
        await client.decide_approval(approval_id, "reject", SUPERVISOR)
        await until(lambda: _no_step_waiting(client, cid), "the rejection to be settled")
        state = await client.state(cid)
        assert [s.status for s in state.steps] == [StepStatus.CANCELLED]
        assert state.rejections[-1].rule == "approval-rejected"
        assert [t.text for t in state.recent_turns][-1].startswith("A supervisor did not approve your request")
        assert backend.ledger_entries("main") == [] and order_details(backend, PENDING)["status"] == "pending"


async def test_decisions_on_other_operations_are_refused_and_change_nothing(temporal_env, settings):
    async with running_worker(temporal_env, settings, approvals=ApprovalPolicy()) as (client, backend):
        cid, approval_id = await _awaiting_approval(client, "tamper")
        other = approval_id[:-12] + ("0" * 12 if not approval_id.endswith("0" * 12) else "1" * 12)
        with pytest.raises(ConversationError) as err:
            await client.decide_approval(other, "approve", SUPERVISOR)
        assert err.value.kind == "not_found" and "bound to one exact operation" in str(err.value)  # never issued
        with pytest.raises(ConversationError) as bad:
            await client.decide_approval(approval_id, "approve", "not a valid approver!")
        assert bad.value.kind == "invalid"
        state = await client.state(cid)
        assert state.approvals[0].status is ApprovalStatus.PENDING and backend.ledger_entries("main") == []


async def test_an_undecided_approval_expires_to_a_human_ticket(temporal_env, settings):
    async with running_worker(temporal_env, settings, approvals=ApprovalPolicy()) as (client, backend):
        short = StatekeeperClient(temporal_env.client, settings.task_queue,
                                  approvals=ApprovalPolicy(timeout_seconds=2.0))
        cid, approval_id = await _awaiting_approval(short, "expire")
        await until(lambda: _no_step_waiting(client, cid), "the approval to expire")
        # the step fails before the ticket is opened; the user's notice follows the ticket
        await until(lambda: _last_turn_has(client, cid, "handed it to a human agent"), "the expiry notice")
        state = await client.state(cid)
        assert state.approvals[0].status is ApprovalStatus.EXPIRED
        assert [s.status for s in state.steps] == [StepStatus.FAILED]
        [ticket] = backend.tickets("main")
        assert "expired undecided" in ticket["summary"]
        assert "handed it to a human agent" in state.recent_turns[-1].text
        assert backend.ledger_entries("main") == []
        with pytest.raises(ConversationError) as late:
            await client.decide_approval(approval_id, "approve", SUPERVISOR)
        assert late.value.kind == "approval_refused" and "expired" in str(late.value)
        # asked again, the change is not offered a second time: the human agent has that order
        # (a yes must not park a second approval, which a supervisor could approve beside them)
        again = await short.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        assert again.awaiting_confirmation is None and again.awaiting_approval is None, again
        assert "human agent" in again.text, again.text
        state = await client.state(cid)
        assert [s.status for s in state.steps] == [StepStatus.FAILED] and len(state.approvals) == 1
        assert state.rejections[-1].rule == "approval-expired"


async def test_a_cancel_withdraws_the_approval(temporal_env, settings):
    async with running_worker(temporal_env, settings, approvals=ApprovalPolicy()) as (client, backend):
        cid, approval_id = await _awaiting_approval(client, "withdraw")
        await client.cancel(cid, "the customer hung up")
        outcome = await asyncio.wait_for(client.outcome(cid), 20)
        assert outcome.state.approvals[0].status is ApprovalStatus.WITHDRAWN
        assert [s.status for s in outcome.state.steps] == [StepStatus.CANCELLED]
        with pytest.raises(ConversationError):
            await client.decide_approval(approval_id, "approve", SUPERVISOR)
        assert backend.ledger_entries("main") == [] and order_details(backend, PENDING)["status"] == "pending"


async def _told_latest(client: StatekeeperClient, cid: str, prefix: str) -> bool:
    told = [t.text for t in (await client.state(cid)).recent_turns if t.role is Role.ASSISTANT]
    return bool(told) and told[-1].startswith(prefix)


async def _last_turn_has(client: StatekeeperClient, cid: str, text: str) -> bool:
    return text in (await client.state(cid)).recent_turns[-1].text


async def _no_step_waiting(client: StatekeeperClient, cid: str) -> bool:
    return not any(s.status is StepStatus.AWAITING_APPROVAL for s in (await client.state(cid)).steps)


async def test_a_second_write_on_an_order_awaiting_approval_is_refused(temporal_env, settings):
    async with running_worker(temporal_env, settings, approvals=ApprovalPolicy()) as (client, backend):
        cid, approval_id = await _awaiting_approval(client, "one-per-order")
        again = await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        assert again.awaiting_confirmation is None and again.awaiting_approval == approval_id
        state = await client.state(cid)
        assert len(state.approvals) == 1 and any(r.rule == "awaiting-approval" for r in state.rejections)
        assert backend.ledger_entries("main") == []
