"""More paths for the recorded histories (``python -m tests.histories.record``): approval
rejected, expired and withdrawn; a transfer; a policy rejection then a declined write; a
superseded message; malformed model output; a cancel while a confirmation is pending;
continue-as-new carrying a cancel. Written against v0.1.0 to find
command-sequence changes the main scenarios do not reach; each scenario has the signature of
those in ``tests.histories.record``.
"""

from __future__ import annotations

import asyncio

from starter.client.conversations import StatekeeperClient
from tests.policy_fixtures import EMAIL, PENDING
from tests.workflow_harness import NO_APPROVALS, Script, Think, call, reply, running_worker, until
from workflows.domain.policy.approvals import ApprovalPolicy
from workflows.domain.contracts import SupportInput
from workflows.domain.state import StepStatus
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id


async def _no_wait(client, cid):
    return not any(s.status is StepStatus.AWAITING_APPROVAL for s in (await client.state(cid)).steps)


async def _awaiting(client, cid):
    await client.start_conversation(cid)
    await client.send_message(cid, f"Hi, my email is {EMAIL}")
    await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
    told = await client.send_message(cid, "yes")
    return told.awaiting_approval


async def approval_rejected(env, settings, save):
    async with running_worker(env, settings, approvals=ApprovalPolicy()) as (client, backend):
        cid = "x-reject"
        aid = await _awaiting(client, cid)
        await client.decide_approval(aid, "reject", "sup-ana")
        await until(lambda: _no_wait(client, cid), "settled")
        await client.send_message(cid, "why not?")
        await client.cancel(cid, "done")
        await client.outcome(cid)
        return [support_workflow_id(cid)]


async def approval_expired(env, settings, save):
    async with running_worker(env, settings, approvals=ApprovalPolicy()) as (client, backend):
        short = StatekeeperClient(env.client, settings.task_queue, approvals=ApprovalPolicy(timeout_seconds=2.0))
        cid = "x-expire"
        await _awaiting(short, cid)
        await until(lambda: _no_wait(client, cid), "expired")
        await client.send_message(cid, "what happened?")
        await client.cancel(cid, "done")
        await client.outcome(cid)
        return [support_workflow_id(cid)]


async def approval_withdrawn(env, settings, save):
    async with running_worker(env, settings, approvals=ApprovalPolicy()) as (client, backend):
        cid = "x-withdraw"
        await _awaiting(client, cid)
        await client.cancel(cid, "hung up")
        await client.outcome(cid)
        return [support_workflow_id(cid)]


async def transfer(env, settings, save):
    script = Script([call("find_user_id_by_email", email=EMAIL), reply("Hello"),
                     {"kind": "transfer_to_human", "summary": "customer wants a human"}])
    async with running_worker(env, settings, brain=script) as (client, backend):
        cid = "x-transfer"
        await client.start_conversation(cid)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        await client.send_message(cid, "I want a human")
        await client.outcome(cid)
        return [support_workflow_id(cid)]


async def policy_rejection_and_decline(env, settings, save):
    script = Script([call("find_user_id_by_email", email=EMAIL), reply("Hello"),
                     call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake"),  # not read yet: rejected
                     call("get_order_details", order_id=PENDING),
                     call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake"),
                     reply("fine, nothing done"),
                     {"kind": "end", "text": "bye"}])
    async with running_worker(env, settings, brain=script) as (client, backend):
        cid = "x-reject-decline"
        await client.start_conversation(cid)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        await client.send_message(cid, f"cancel {PENDING}")
        await client.send_message(cid, "no")
        await client.send_message(cid, "bye")
        await client.outcome(cid)
        return [support_workflow_id(cid)]


async def superseded(env, settings, save):
    script = Script([call("find_user_id_by_email", email=EMAIL), reply("Hello Raj"),
                     Think(2.0, call("get_order_details", order_id=PENDING)),
                     call("cancel_pending_order", order_id=PENDING, reason="ordered by mistake"),
                     reply("Your order is still pending.")])
    async with running_worker(env, settings, brain=script) as (client, backend):
        cid = "x-superseded"
        await client.start_conversation(cid)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        older = asyncio.ensure_future(client.send_message(cid, f"Cancel {PENDING}"))
        await until(lambda: script.calls == 3, "thinking")
        newer = asyncio.ensure_future(client.send_message(cid, "wait, just the status"))
        await asyncio.gather(older, newer)
        await client.cancel(cid, "done")
        await client.outcome(cid)
        return [support_workflow_id(cid)]


async def malformed(env, settings, save):
    tight = settings.model_copy(update={"model_max_tokens": 8})
    async with running_worker(env, tight) as (client, backend):
        cid = "x-malformed"
        await client.start_conversation(cid)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        await client.cancel(cid, "done")
        await client.outcome(cid)
        return [support_workflow_id(cid)]


async def cancel_while_pending(env, settings, save):
    async with running_worker(env, settings) as (client, backend):
        cid = "x-cancel-pending"
        await client.start_conversation(cid)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        await client.cancel(cid, "bye")
        await client.outcome(cid)
        return [support_workflow_id(cid)]


async def can_with_cancel(env, settings, save):
    async with running_worker(env, settings) as (client, backend):
        cid = "x-can-cancel"
        await env.client.start_workflow(SupportWorkflow.run, SupportInput(conversation_id=cid, max_turns_per_run=1,
                                        approvals=NO_APPROVALS), id=support_workflow_id(cid), task_queue=settings.task_queue)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        await client.send_message(cid, f"What is the status of order {PENDING}?")
        await client.cancel(cid, "done")
        await client.outcome(cid)
        return [support_workflow_id(cid)]


MORE_SCENARIOS = [approval_rejected, approval_expired, approval_withdrawn, transfer, policy_rejection_and_decline,
                  superseded, malformed, cancel_while_pending, can_with_cancel]
