"""Message ids: a message retried with the same id is handled once and gets its first
reply, within a run (Temporal's update-id dedup) and after the run continued as new (the
replies by message id travel in the next run's input).

SupportWorkflow on a real Temporal dev server with a real worker and the offline model.
"""

from __future__ import annotations

import uuid

from tests.policy_fixtures import EMAIL
from tests.workflow_harness import NO_APPROVALS, running_worker
from workflows.contracts import SupportInput
from workflows.support import SupportWorkflow, support_workflow_id


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
    # adversarial review: "no" sent under the id of an earlier "cancel it" got that message's
    # confirmation prompt back, so the user believed they had declined
    from starter.errors import ConversationError

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
