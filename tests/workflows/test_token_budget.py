"""Token accounting and the per-conversation budget on a real Temporal dev server: usage with
cache reads and writes accumulates in the state (the query) and the operators' details; a
conversation whose next model call would pass its budget is handed to a human agent, with a
clear reply, a ticket and the transferred status; a write the user confirms when no model call
fits any more still runs and its outcome is told before the hand-off."""

from __future__ import annotations

from temporalio.api.sdk.v1 import WorkflowMetadata

from starter.client.conversations import StatekeeperClient
from tests.policy_fixtures import CUSTOMER, EMAIL, PENDING
from tests.workflow_harness import NO_APPROVALS, ListBrain, call, order_details, running_worker
from workflows.domain import replies
from workflows.conversation.budget import BUDGET_REASON


async def details(env, cid: str) -> str:
    metadata = await env.client.get_workflow_handle(f"support-{cid}").query(
        "__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return metadata.current_details


async def test_usage_with_cache_reads_and_writes_shows_in_the_query_and_the_details(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, _):
        cid = await client.start_conversation("usage-shown")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        first = (await client.state(cid)).usage
        assert first.model_calls >= 1 and first.model == settings.offline_model_name
        # the first call wrote the shared prefix; the calls after it (the next turn's) read it
        assert first.cache_creation_input_tokens > 1000
        assert first.input_tokens > 0 and first.output_tokens > 0 and first.budget_tokens is None
        await client.send_message(cid, f"What is the status of order {PENDING}?")
        second = (await client.state(cid)).usage
        assert second.model_calls > first.model_calls
        assert second.cache_read_input_tokens > first.cache_read_input_tokens
        assert second.cache_read_input_tokens - first.cache_read_input_tokens > 1000
        assert second.total_tokens() > first.total_tokens()
        shown = await details(temporal_env, cid)
        assert f"**Model usage:** {second.model_calls} calls, {second.total_tokens():,} tokens" in shown


async def test_a_conversation_past_its_budget_is_handed_to_a_human(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (_, backend):
        client = StatekeeperClient(temporal_env.client, settings.task_queue, settings.write_timeout_seconds,
                                   approvals=NO_APPROVALS, token_budget=4000)
        cid = await client.start_conversation("over-budget")
        # each model call needs about 2,000-2,700 tokens: turn 1's one call fits, the next one does not
        first = await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert first.status == "active" and first.text != replies.BUDGET_EXCEEDED
        reply = await client.send_message(cid, f"What is the status of order {PENDING}?")
        assert reply.text == replies.BUDGET_EXCEEDED and reply.status == "transferred"
        state = await client.state(cid)
        assert state.status.value == "transferred" and state.ended_reason == BUDGET_REASON
        assert state.usage.budget_tokens == 4000
        assert 0 < state.usage.total_tokens() <= 4000 and state.usage.model_calls == 1
        [ticket] = backend.tickets("main")
        assert "token budget" in ticket["summary"] and ticket["ticket_key"] == f"transfer:{cid}:t2"
        assert "of a 4,000-token budget" in await details(temporal_env, cid)


async def test_without_a_budget_nothing_is_counted_ahead_or_handed_over(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, backend):
        cid = await client.start_conversation("no-budget")
        reply = await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert reply.status == "active" and reply.text != replies.BUDGET_EXCEEDED
        assert backend.tickets("main") == []


async def _cancel_turns(temporal_env, settings, cid: str, budget: int):
    """Turn 1 shows a cancel of PENDING (the customer, their profile and the order are read
    from the message before the model's one call, which proposes the cancel), turn 2 confirms
    it, turn 3 says thanks; returns (tokens used by turn 1, the yes reply, the state after it,
    the thanks reply, backend)."""
    brain = ListBrain([call("cancel_pending_order", order_id=PENDING, reason="no longer needed")])
    async with running_worker(temporal_env, settings, brain=brain) as (_, backend):
        client = StatekeeperClient(temporal_env.client, settings.task_queue, settings.write_timeout_seconds,
                                   approvals=NO_APPROVALS, token_budget=budget)
        await client.start_conversation(cid)
        assert (await client.send_message(cid, f"my email is {EMAIL}, cancel {PENDING}")).awaiting_confirmation
        state = await client.state(cid)
        assert state.customer is not None and state.customer.user_id == CUSTOMER and PENDING in state.orders
        used = state.usage.total_tokens()
        answer = await client.send_message(cid, "yes")
        after_yes = await client.state(cid)
        thanks = await client.send_message(cid, "thanks")
        return used, answer, after_yes, thanks, backend


async def test_a_write_confirmed_when_no_model_call_fits_the_budget_still_tells_what_was_applied(
        temporal_env, settings, tmp_path):
    """The budget leaves no room for a model call after the turn that showed a cancel: the yes
    still runs the cancel and the user is told it was done (the workflow words a write's outcome,
    no model call), and the next message, which would need a model call, is handed to a human."""
    measure = settings.model_copy(update={"data_dir": tmp_path / "measure",  # an order not yet cancelled
                                          "database_url": f"sqlite:///{tmp_path / 'measure.sqlite'}"})
    used, _, _, _, _ = await _cancel_turns(temporal_env, measure, "budget-measure-1", 10**9)
    # the same turns with room for turn 1 and not for one more model call, which reserves its
    # input plus the output bound (max_tokens) first: the call of turn 1 needs less than what it used
    budget = used + settings.model_max_tokens - 1
    _, answer, state, thanks, backend = await _cancel_turns(temporal_env, settings, "budget-after-w-1", budget)
    [step] = [s for s in state.steps if s.name == "cancel_pending_order"]
    assert step.status.value == "done" and answer.status == "active"
    assert answer.text.startswith(f"Your request is done: {step.detail}")
    assert f"Order {PENDING} is now cancelled." in answer.text
    assert state.usage.total_tokens() == used  # the yes made no model call
    assert order_details(backend, PENDING)["status"] == "cancelled"
    # the next model call does not fit: handed over, nothing written in that turn to tell
    assert thanks.status == "transferred" and thanks.text == replies.BUDGET_EXCEEDED
    [ticket] = backend.tickets("main")
    assert "token budget" in ticket["summary"] and ticket["ticket_key"] == "transfer:budget-after-w-1:t3"


def test_the_hand_off_reply_names_done_and_refused_writes_and_nothing_else():
    assert replies.budget_exceeded([], []) == replies.BUDGET_EXCEEDED
    said = replies.budget_exceeded(["cancel A"], ["return B"])
    assert said == f'Your request is done: cancel A Your request did not go through: "return B" {replies.BUDGET_EXCEEDED}'
