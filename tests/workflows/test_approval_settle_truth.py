"""What the user is told when a parked write's approval is settled stays true:

- a reset to after the user's yes but before the supervisor's decision puts the approval back
  to pending; when it then expires (or is rejected), the write may already have applied in the
  first run: the ledger is asked by the write's key before "Nothing has been changed" is said
  and before a human is asked to "decide and act by hand";

SupportWorkflow on a real Temporal dev server with a real worker, SQLite, a test brain.
"""

from __future__ import annotations

import uuid

from temporalio.api.enums.v1 import EventType

from starter.client.conversations import StatekeeperClient
from tests.policy_fixtures import EMAIL, PENDING
from tests.resets import completed_before, reset_to
from tests.workflow_harness import order_details, running_worker, until
from tests.workflows.test_reset_outcomes import CANCEL
from workflows.conversation.approvals import NO_TICKET
from workflows.domain.policy.approvals import ApprovalPolicy, ApprovalStatus
from workflows.domain.state import Role, StepStatus


async def _parked(client: StatekeeperClient, name: str) -> tuple[str, str]:
    cid = await client.start_conversation(f"{name}-{uuid.uuid4().hex[:6]}")
    await client.send_message(cid, f"Hi, my email is {EMAIL}")
    assert (await client.send_message(cid, f"cancel {PENDING} please")).awaiting_confirmation
    parked = await client.send_message(cid, "yes")
    assert parked.awaiting_approval
    return cid, parked.awaiting_approval


async def _before_the_decision(env, workflow_id: str) -> int:
    """The last completed workflow task before the ``decide_approval`` update was accepted."""
    def decision(event) -> bool:
        return (event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED and event
                .workflow_execution_update_accepted_event_attributes.accepted_request.input.name == "decide_approval")
    return await completed_before(env, workflow_id, decision, "decision")


def _told(state) -> str:
    return [t.text for t in state.recent_turns if t.role is Role.ASSISTANT][-1]


async def test_an_approval_that_expires_after_a_reset_finds_the_applied_write(temporal_env, settings):
    async with running_worker(temporal_env, settings, brain=CANCEL) as (_, backend):
        client = StatekeeperClient(temporal_env.client, settings.task_queue, settings.write_timeout_seconds,
                                   approvals=ApprovalPolicy(timeout_seconds=6.0))  # 826.70 > 500.00
        cid, approval_id = await _parked(client, "settle-reset")
        await client.decide_approval(approval_id, "approve", "alice")

        async def applied() -> bool:
            return bool((await client.state(cid)).completed_operations)
        await until(applied, "the approved cancel to run")
        [first] = (await client.state(cid)).completed_operations
        assert first.ok and order_details(backend, PENDING)["status"] == "cancelled"

        # the reset keeps the yes (the approval is pending again) and drops the decision
        await reset_to(temporal_env, f"support-{cid}", await _before_the_decision(temporal_env, f"support-{cid}"))

        async def settled() -> bool:
            state = await client.state(cid)
            return bool(state.approvals) and state.approvals[0].status is not ApprovalStatus.PENDING \
                and not state.awaiting_approval and _told(state) != "Done." and "approval" not in _told(state)
        await until(settled, "the approval to expire again after the reset", 30)
        state = await client.state(cid)
    told = _told(state)
    assert "Nothing has been changed" not in told and "human agent" not in told
    assert "Cancel order #W4566809" in told
    step = next(s for s in state.steps if s.name == "cancel_pending_order")
    assert step.status is StepStatus.DONE
    [again] = state.completed_operations
    assert again.ok and again.idempotency_key == first.idempotency_key
    assert backend.tickets("main") == []  # no human is asked to decide a cancel that was made
    assert order_details(backend, PENDING)["status"] == "cancelled" and backend.duplicate_writes("main") == 0


async def test_an_expiry_without_a_ticket_does_not_promise_a_human(temporal_env, settings, tmp_path):
    """The ticketing service refuses every request (its own fault injection, over HTTP)."""
    import httpx

    from systems.fleet import Fleet, sqlite_databases
    from tests.service_fixtures import arm

    fleet = Fleet(sqlite_databases(tmp_path))
    urls = fleet.start()
    try:
        arm(urls["ticketing"], "http_5xx", count=100)
        async with running_worker(temporal_env, settings, brain=CANCEL, services=urls) as (_, backend):
            client = StatekeeperClient(temporal_env.client, settings.task_queue, settings.write_timeout_seconds,
                                       approvals=ApprovalPolicy(timeout_seconds=2.0))
            cid, _ = await _parked(client, "settle-no-ticket")

            async def settled() -> bool:
                state = await client.state(cid)
                return state.rejections and state.rejections[-1].reason.startswith("opening the ticket failed")
            await until(settled, "the expiry's ticket to fail", 40)
            await until(lambda: _last_is_notice(client, cid), "the user to be told")
            state = await client.state(cid)
            nxt = await client.send_message(cid, "hello?")
        tickets = httpx.get(f"{urls['ticketing']}/tickets/references").json()
    finally:
        fleet.stop()
    told = _told(state)
    assert tickets == []
    assert "handed it to a human agent" not in told and "get back to you" not in told, told
    assert "could not pass it to a human agent" in told
    assert "nothing has been changed" in told.lower() and "Cancel order #W4566809" in told
    assert "handed it to a human agent" not in nxt.text and "get back to you" not in nxt.text
    step = next(s for s in state.steps if s.name == "cancel_pending_order")
    assert step.status is StepStatus.FAILED and step.error == NO_TICKET
    assert backend.ledger_entries("main") == [] and order_details(backend, PENDING)["status"] == "pending"


async def _last_is_notice(client: StatekeeperClient, cid: str) -> bool:
    return "decided in time" in _told(await client.state(cid))


async def _before_the_expiry(env, workflow_id: str) -> int:
    """The last completed workflow task before the approval's timer fired."""
    return await completed_before(env, workflow_id, lambda e: e.event_type == EventType.EVENT_TYPE_TIMER_FIRED,
                                  "timer fired")


async def test_an_expiry_again_after_a_reset_finds_the_ticket_held(temporal_env, settings):
    """The reset re-runs the expiry of an approval that had expired to a ticket: the ticketing
    system already holds the ticket (``open_ticket`` answers False: not opened now), and the
    user is told the truth, a human agent has it; not that none could be given it."""
    async with running_worker(temporal_env, settings, brain=CANCEL) as (_, backend):
        client = StatekeeperClient(temporal_env.client, settings.task_queue, settings.write_timeout_seconds,
                                   approvals=ApprovalPolicy(timeout_seconds=2.0))
        cid, _ = await _parked(client, "settle-held")
        await until(lambda: _last_is_notice(client, cid), "the approval to expire")
        [ticket] = backend.tickets("main")
        await reset_to(temporal_env, f"support-{cid}", await _before_the_expiry(temporal_env, f"support-{cid}"))

        async def expired_again() -> bool:
            state = await client.state(cid)
            return state.approvals[0].status is ApprovalStatus.EXPIRED and await _last_is_notice(client, cid)
        await until(expired_again, "the approval to expire again after the reset", 30)
        state = await client.state(cid)
    assert "handed it to a human agent" in _told(state)
    assert backend.tickets("main") == [ticket]
    step = next(s for s in state.steps if s.name == "cancel_pending_order")
    assert step.status is StepStatus.FAILED and step.error != NO_TICKET
