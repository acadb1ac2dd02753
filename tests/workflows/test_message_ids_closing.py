"""A message retried with its id after the run continued as new, once the conversation is
closing or closed: the retry gets the message's first reply, as it would within one run.

Temporal deduplicates update ids within a run only; the replies of earlier runs travel in
the next run's input (``SupportInput.answered``). Before, the update validator refused the
retry before the handler could look the id up ("is being cancelled", "is ended; start a new
conversation", "a colleague is checking"), and once the run had completed Temporal refused
it as finished: a user whose message was handled was told the conversation had finished
without its reply, so could not tell whether it had been handled.

SupportWorkflow on a real Temporal dev server with a real worker and a scripted model.
"""

from __future__ import annotations

import uuid

from tests.policy_fixtures import EMAIL
from tests.workflow_harness import NO_APPROVALS, ListBrain, call, reply, running_worker
from workflows.domain.contracts import SupportInput
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id


async def _over_a_continue_as_new(temporal_env, settings, client, prefix: str):
    cid = f"{prefix}-{uuid.uuid4().hex[:6]}"
    first_run = await temporal_env.client.start_workflow(
        SupportWorkflow.run, SupportInput(conversation_id=cid, max_turns_per_run=1, approvals=NO_APPROVALS),
        id=support_workflow_id(cid), task_queue=settings.task_queue)
    first = await client.send_message(cid, f"Hi, my email is {EMAIL}", message_id="m-1")
    latest = await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).describe()
    assert latest.run_id != first_run.first_execution_run_id, "no continue-as-new; the test would prove nothing"
    return cid, first


async def test_a_message_retried_after_continue_as_new_once_the_conversation_ended_gets_its_reply(
        temporal_env, settings):
    brain = ListBrain([call("find_user_id_by_email", email=EMAIL), reply("How can I help?"),
                       {"kind": "end", "text": "Goodbye."}])
    async with running_worker(temporal_env, settings, brain=brain) as (client, _):
        cid, first = await _over_a_continue_as_new(temporal_env, settings, client, "retry-ended")
        await client.send_message(cid, "that is all, bye", message_id="m-2")
        outcome = await client.outcome(cid)
        assert outcome.status == "ended"
        assert (await client.send_message(cid, f"Hi, my email is {EMAIL}", message_id="m-1")) == first


async def test_a_message_retried_after_continue_as_new_while_a_cancel_closes_gets_its_reply(
        temporal_env, settings):
    brain = ListBrain([call("find_user_id_by_email", email=EMAIL), reply("How can I help?")])
    async with running_worker(temporal_env, settings, brain=brain) as (client, _):
        cid, first = await _over_a_continue_as_new(temporal_env, settings, client, "retry-cancelled")
        await client.cancel(cid, "customer hung up")
        await client.outcome(cid)
        assert (await client.send_message(cid, f"Hi, my email is {EMAIL}", message_id="m-1")) == first


async def test_a_message_retried_after_continue_as_new_while_an_operator_checks_gets_its_reply(
        temporal_env, settings):
    # the conversation waits (days) for an operator's resolution of an unknown outcome: a retry
    # of an earlier run's message was refused "A colleague is checking..." instead of its reply
    from tests.faults import UnknownWrites
    from tests.policy_fixtures import CUSTOMER, PENDING

    address = dict(order_id=PENDING, address1="1 Retry Road", address2="", city="Austin", state="TX",
                   country="USA", zip="78701")
    brain = ListBrain([call("find_user_id_by_email", email=EMAIL), reply("How can I help?"),
                       call("get_user_details", user_id=CUSTOMER), call("get_order_details", order_id=PENDING),
                       call("modify_pending_order_address", **address)])
    async with running_worker(temporal_env, settings, brain=brain, wrap_port=UnknownWrites) as (client, _):
        cid, first = await _over_a_continue_as_new(temporal_env, settings, client, "retry-checking")
        assert (await client.send_message(cid, f"ship {PENDING} to Austin")).awaiting_confirmation
        assert (await client.send_message(cid, "yes")).status == "escalated"
        assert (await client.state(cid)).status.value == "escalated"  # waiting for an operator, still running
        assert (await client.send_message(cid, f"Hi, my email is {EMAIL}", message_id="m-1")) == first
