"""Message ids: a message retried with the same id is handled once and gets its first reply,
within a run (Temporal's update-id dedup) and after the run continued as new (the replies by
message id travel in the next run's input, ``SupportInput.answered``), also once the
conversation is closing or closed: the update validator lets the handler look the id up first
(never "is being cancelled", "is ended; start a new conversation", "a colleague is checking",
nor Temporal's "finished" once the run completed), so a user whose message was handled can
tell it was. Another text under a used id is a conflict, never the old reply.

SupportWorkflow on a real Temporal dev server with a real worker and the offline model or a
scripted one.
"""

from __future__ import annotations

import uuid

from tests.policy_fixtures import CUSTOMER, EMAIL, PENDING
from tests.workflow_harness import NO_APPROVALS, ListBrain, call, order_details, running_worker, reply
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id
from workflows.domain.contracts import SupportInput


async def test_a_message_retried_after_continue_as_new_is_handled_once(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        cid = f"msg-ids-{uuid.uuid4().hex[:6]}"
        first_run = await temporal_env.client.start_workflow(
            SupportWorkflow.run, SupportInput(conversation_id=cid, max_turns_per_run=1, approvals=NO_APPROVALS),
            id=support_workflow_id(cid), task_queue=settings.task_queue)
        reply = await client.send_message(cid, f"Hi, my email is {EMAIL}", message_id="m-1")
        latest = await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).describe()
        assert latest.run_id != first_run.first_execution_run_id  # that turn continued as new
        again = await client.send_message(cid, f"Hi, my email is {EMAIL}", message_id="m-1")
        assert again == reply
        state = await client.state(cid)
        assert state.turn == 1 and sum(t.role.value == "user" for t in state.recent_turns) == 1
        other = await client.send_message(cid, "What can you do?", message_id="m-2")
        assert other.turn == 2


async def test_another_text_under_a_used_message_id_is_a_conflict_not_the_old_reply(temporal_env, settings):
    # "no" sent under the id of an earlier "cancel it" must not get that message's confirmation
    # prompt back, which would let the user believe they had declined
    from starter.client.errors import ConversationError

    async with running_worker(temporal_env, settings) as (client, backend):
        cid = f"msg-reuse-{uuid.uuid4().hex[:6]}"
        await client.start_conversation(cid)
        first = await client.send_message(cid, f"Hi, my email is {EMAIL}", message_id="q1")
        try:
            await client.send_message(cid, "no", message_id="q1")
        except ConversationError as err:
            assert err.kind == "conflict" and 'message id "q1" was already used' in str(err)
        else:
            raise AssertionError("a reused message id with another text was answered")
        assert (await client.send_message(cid, f"Hi, my email is {EMAIL}", message_id="q1")) == first  # a true retry
        assert (await client.state(cid)).turn == 1  # the other text was never handled


async def test_a_retried_yes_does_not_confirm_the_write_its_lost_reply_proposed(temporal_env, settings):
    """The reply to a "yes" is lost (the call fails with a transport error) and that reply
    proposed a write (the yes answered the model's question, and the model proposed the change);
    the client sends the "yes" again. With the same message id the retry returns the first reply
    (the write still awaiting its own yes) and nothing runs twice or newly: neither the proposed
    write nor the cancel the user confirmed earlier."""
    new_address = dict(address1="1 Elm St", address2="", city="Austin", state="TX", country="USA", zip="78701")
    # the workflow reads the customer, their profile and the order the first message names itself
    brain = ListBrain([call("cancel_pending_order", order_id=PENDING, reason="no longer needed"),
                       reply("Shall I also change your default address to 1 Elm St, Austin TX 78701?"),
                       call("modify_user_address", user_id=CUSTOMER, **new_address)])
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = await client.start_conversation(f"retried-yes-{uuid.uuid4().hex[:6]}")
        assert (await client.send_message(cid, f"my email is {EMAIL}, cancel {PENDING}")).awaiting_confirmation
        assert (await client.send_message(cid, "yes")).text.startswith("Your request is done:")  # the cancel ran
        assert "1 Elm St" in (await client.send_message(cid, "I have moved to 1 Elm St, Austin TX 78701")).text
        first = await client.send_message(cid, "yes", message_id="yes-1")
        assert first.awaiting_confirmation and "1 Elm St" in first.awaiting_confirmation  # the write, shown
        again = await client.send_message(cid, "yes", message_id="yes-1")  # the client's retry
        assert again == first
        state = await client.state(cid)
        assert state.turn == 4 and [op.tool for op in state.completed_operations] == ["cancel_pending_order"]
        assert [e["tool"] for e in backend.ledger_entries("main")] == ["cancel_pending_order"]
        assert state.pending_confirmation is not None  # still awaiting the user's own yes
        assert order_details(backend, PENDING)["status"] == "cancelled"


async def test_another_text_under_a_used_message_id_of_a_finished_conversation_says_finished(temporal_env, settings):
    # POST /conversations {"conversation_id": <a cancelled one>, "text": ...} (message id "first"
    # by default) is told the conversation finished, not to send it "with a new message id"
    from starter.client.errors import ConversationError

    async with running_worker(temporal_env, settings) as (client, backend):
        cid = f"msg-done-{uuid.uuid4().hex[:6]}"
        first = await client.send_message(await client.start_conversation(cid), f"Hi, my email is {EMAIL}",
                                          message_id="first")
        await client.cancel(cid, "customer hung up")
        await client.outcome(cid)  # the run has ended
        assert (await client.send_message(cid, f"Hi, my email is {EMAIL}", message_id="first")) == first
        try:
            await client.send_message(cid, "hi", message_id="first")
        except ConversationError as err:
            assert err.kind == "finished" and "has finished" in str(err) and "new message id" not in str(err)
        else:
            raise AssertionError("another text under a used message id of a finished conversation was answered")


# --- Retries once the conversation is closing or closed ---

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
    # of an earlier run's message gets its reply, not "A colleague is checking..."
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
