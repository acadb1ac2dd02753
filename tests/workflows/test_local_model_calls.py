"""Model calls as local activities (``SupportInput.local_model_calls``, ``STATEKEEPER_MODEL_CALLS=local``):
a turn with one read is one workflow task with no activity task, its history replays (and so
does the control's), and a cancel sent during a slow model call still stops it before it ends (it reaches the
workflow at the workflow task's heartbeat), or, sent in the call's last second, wins over its proposal. The default (model calls as activities) is the
control of the first test.

SupportWorkflow on a real Temporal dev server and a real worker; the model is faked at its
boundary by a scripted brain.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from temporalio.api.enums.v1 import EventType
from temporalio.worker import Replayer

from starter.runtime.connection import data_converter
from tests.policy_fixtures import EMAIL, PENDING
from tests.workflow_harness import SLOW, Script, Think, call, reply, running_worker, until
from starter.runtime.worker import workflow_runner
from workflows.refund.workflow import RefundWorkflow
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id
from workflows.domain.replies import TRANSFERRED

SLOW_SECONDS = 60.0


def _script() -> Script:
    return Script([call("find_user_id_by_email", email=EMAIL), reply("Hello Raj, how can I help?"),
                   call("get_order_details", order_id=PENDING), reply("It is pending.")])


def _last_turn(history) -> list:
    """The events from the last user message's acceptance to its completion."""
    events = list(history.events)
    start = max(i for i, e in enumerate(events) if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
    end = max(i for i, e in enumerate(events) if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED)
    return events[start:end + 1]


async def _turn_with_one_read(temporal_env, settings, local: bool):
    async with running_worker(temporal_env, settings, brain=_script(), local_model_calls=local) as (client, _):
        cid = await client.start_conversation(f"local-{local}-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        answer = await client.send_message(cid, f"Where is order {PENDING}?")
        state = await client.state(cid)
        history = await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).fetch_history()
    assert answer.text == "It is pending." and PENDING in state.orders
    return history


async def test_a_turn_with_one_read_is_one_workflow_task_with_local_model_calls(temporal_env, settings):
    local = await _turn_with_one_read(temporal_env, settings, local=True)
    turn = _last_turn(local)
    kinds = [e.event_type for e in turn]
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED not in kinds
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED not in kinds  # accepted and answered in one task
    assert kinds.count(EventType.EVENT_TYPE_MARKER_RECORDED) >= 3  # two model calls and the read
    # the same turn with model calls as activities (the default): two activity tasks, more tasks
    control_history = await _turn_with_one_read(temporal_env, settings, local=False)
    control = _last_turn(control_history)
    scheduled = [e.activity_task_scheduled_event_attributes.activity_type.name for e in control
                 if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
    assert scheduled == ["propose_action", "propose_action"]
    assert [e.event_type for e in control].count(EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) >= 2
    replayer = Replayer(workflows=[SupportWorkflow, RefundWorkflow], data_converter=data_converter(),
                        workflow_runner=workflow_runner())
    await replayer.replay_workflow(local)
    await replayer.replay_workflow(control_history)


async def test_a_cancel_during_a_slow_local_model_call_stops_it_before_it_ends(temporal_env, settings):
    script = Script([call("find_user_id_by_email", email=EMAIL), reply("Hello Raj, how can I help?"),
                     SLOW])  # thinks for 60 s
    async with running_worker(temporal_env, settings, brain=script, local_model_calls=True) as (client, backend):
        cid = await client.start_conversation(f"local-cancel-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        asking = asyncio.ensure_future(client.send_message(cid, f"Cancel {PENDING}, I ordered it by mistake"))
        await until(lambda: script.calls == 3, "the model thinking")
        sent = time.monotonic()
        await client.cancel(cid, "the customer changed their mind")
        answer = await asyncio.wait_for(asking, 60)
        stopped_after = time.monotonic() - sent
        state = await client.state(cid)
        await until(lambda: script.cancelled == 1, "the model call's cancellation")  # not left to finish
    assert state.status.value == "cancelled" and state.pending_confirmation is None
    assert backend.ledger_entries("main") == []
    # at the workflow task's heartbeat (80 % of its 4 s timeout), not when the call would have ended
    assert stopped_after < SLOW_SECONDS / 4, (stopped_after, answer.text)


async def test_a_cancel_in_the_last_second_of_a_local_model_call_wins_over_its_proposal(temporal_env, settings):
    """A cancel sent after the workflow task's last heartbeat reaches the workflow together with
    the model call's result: the cancel, accepted first, wins; the proposed transfer opens no
    ticket and the user is told only of the cancel."""
    script = Script([call("find_user_id_by_email", email=EMAIL), reply("Hello Raj, how can I help?"),
                     Think(4.0, {"kind": "transfer_to_human", "summary": "the customer asks for a person"})])
    async with running_worker(temporal_env, settings, brain=script, local_model_calls=True) as (client, backend):
        cid = await client.start_conversation(f"local-late-cancel-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        asking = asyncio.ensure_future(client.send_message(cid, "Can I talk to a person?"))
        await until(lambda: script.calls == 3, "the model thinking")
        await asyncio.sleep(3.7)  # past the workflow task's heartbeat at 3.2 s, before the call ends at 4 s
        await client.cancel(cid, "the customer changed their mind")
        answer = await asyncio.wait_for(asking, 60)
        state = await client.state(cid)
    assert state.status.value == "cancelled", state.status
    assert backend.tickets("main") == [] and TRANSFERRED not in answer.text
