"""Two parked writes settled in one batch, the first escalating: the second, approved by a
supervisor, is neither run nor silently lost. The escalation withdraws it and says so (the
user's reply and the human's ticket list it), as it does for writes still awaiting a decision.

SupportWorkflow on a real Temporal dev server with a real worker, SQLite, a scripted brain;
writes fail as ``OutcomeUnknown`` (``tests.faults.UnknownWrites``).
"""

from __future__ import annotations

import asyncio
import uuid

from tests.faults import UnknownWrites
from tests.policy_fixtures import CARD, CUSTOMER, DELIVERED, EMAIL, PENDING
from tests.workflow_harness import Script, Think, call, order_details, reply, running_worker, until
from workflows.domain.policy.approvals import ApprovalPolicy, ApprovalStatus
from workflows.domain.state import Role, StepStatus

PHONE = "9692325258"  # 528.63 in DELIVERED: its return is above the 500.00 threshold


async def test_an_escalation_in_a_settle_batch_withdraws_the_approved_write_after_it(temporal_env, settings):
    script = Script([call("find_user_id_by_email", email=EMAIL), reply("Hello Raj, how can I help?"),
                     call("get_user_details", user_id=CUSTOMER), call("get_order_details", order_id=DELIVERED),
                     call("return_delivered_order_items", order_id=DELIVERED, item_ids=[PHONE],
                          payment_method_id=CARD),
                     call("get_order_details", order_id=PENDING),
                     call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake"),
                     Think(8.0, reply("Both are with a supervisor."))])
    async with running_worker(temporal_env, settings, brain=script, approvals=ApprovalPolicy(),
                              wrap_port=UnknownWrites) as (client, backend):
        cid = await client.start_conversation(f"settle-batch-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert (await client.send_message(cid, f"Return the phone from {DELIVERED}")).awaiting_confirmation
        first = (await client.send_message(cid, "yes")).awaiting_approval
        assert (await client.send_message(cid, f"Cancel {PENDING}, I ordered it by mistake")).awaiting_confirmation
        second = (await client.send_message(cid, "yes")).awaiting_approval
        assert first and second and first != second
        thinking = asyncio.ensure_future(client.send_message(cid, "Any news?"))
        await asyncio.sleep(2.0)  # the model call is in flight: both decisions land before the settle
        await client.decide_approval(first, "approve", "sup-ana")
        await client.decide_approval(second, "approve", "sup-ana")
        await asyncio.wait_for(thinking, 30)

        async def closed() -> bool:
            return (await client.state(cid)).status.value == "escalated"
        await until(closed, "the first write to escalate", 60)
        state = await client.state(cid)
    told = [t.text for t in state.recent_turns if t.role is Role.ASSISTANT][-1]
    cancel_step = next(s for s in state.steps if s.name == "cancel_pending_order")
    assert cancel_step.status is StepStatus.CANCELLED
    # approved, then withdrawn by the escalation before it ran: the approver stays on record
    withdrawn = next(a for a in state.approvals if a.approval_id == second)
    assert withdrawn.status is ApprovalStatus.WITHDRAWN and withdrawn.approver == "sup-ana", withdrawn
    assert withdrawn.note and withdrawn.note.endswith("(after approval)"), withdrawn.note
    # the user had been told the cancel waits for a supervisor: the escalation says it was not made
    assert f"Cancel order {PENDING}" in told, told
    [ticket] = [t for t in backend.tickets("main") if t["ticket_key"].startswith("escalate:")]
    assert f"Cancel order {PENDING}" in ticket["summary"]
    assert order_details(backend, PENDING)["status"] == "pending" and backend.ledger_entries("main") == []
