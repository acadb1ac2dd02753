"""The safe-replay decision and operators' resolutions, on a real Temporal
server, worker and retail system of record (only the model is faked, at its boundary):

- a write whose outcome is unknown (OutcomeUnknown, escalated): ``replay-check`` refuses
  with the reasons, ``resume`` refuses and changes nothing; an operator resolves it (bad
  inputs refused with the state intact), the user is told, the conversation goes on, and the
  check then says resume;
- a run that died while its applied write's answer was on its way (terminated): the check
  says resume, ``resume`` resets it, the write re-runs under its key (recorded, not applied
  again) and the conversation completes with exactly one effect in the ledger.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Replayer

from starter.client.conversations import ConversationError
from starter.runtime.connection import data_converter
from starter.ops.replay_check import Systems, check
from starter.ops.replay_resume import ResumeRefused, _claim, resume
from tests.faults import UnknownWrites
from tests.policy_fixtures import CUSTOMER, EMAIL, PENDING
from tests.workflow_harness import ListBrain, call, reply, running_worker
from starter.runtime.worker import workflow_runner
from workflows.domain import replies
from workflows.refund.workflow import RefundWorkflow
from workflows.conversation.workflow import SupportWorkflow

ADDRESS = dict(order_id=PENDING, address1="1 Replay Road", address2="", city="Austin", state="TX", country="USA",
               zip="78701")
TOOL = "modify_pending_order_address"


def _brain(*after: dict) -> ListBrain:
    return ListBrain([call("find_user_id_by_email", email=EMAIL), call("get_user_details", user_id=CUSTOMER),
                      call("get_order_details", order_id=PENDING), call(TOOL, **ADDRESS), *after])


async def _events(env, cid: str) -> int:
    return len((await env.client.get_workflow_handle(f"support-{cid}").fetch_history()).events)


async def test_an_unknown_outcome_is_refused_until_an_operator_resolves_it(temporal_env, settings):
    faulty: list[UnknownWrites] = []

    def wrap(port):
        faulty.append(UnknownWrites(port))
        return faulty[0]

    async with running_worker(temporal_env, settings, brain=_brain(), wrap_port=wrap) as (client, backend):
        cid = f"replay-unknown-{uuid.uuid4().hex[:6]}"
        await client.start_conversation(cid)
        assert (await client.send_message(cid, f"my email is {EMAIL}, ship {PENDING} to Austin")).awaiting_confirmation
        answer = await client.send_message(cid, "yes")
        assert answer.status == "escalated" and answer.text == replies.ESCALATED
        step = next(s for s in (await client.state(cid)).steps if s.name == TOOL)
        assert step.status.value == "unknown"
        key = f"{TOOL}:{PENDING}:{step.step_id}"

        systems = Systems(backend=backend)
        report = await check(temporal_env.client, cid, systems)
        assert report.input_known and report.run_status == "running"
        assert report.verdict == "refuse"
        [write] = [e for e in report.effects if e.activity == "run_write_tool"]
        assert (write.key, write.status, write.failure_type) == (key, "unknown", "OutcomeUnknown")
        assert "escalated as unknown" in write.reason
        [ticket] = [e for e in report.effects if e.activity == "open_ticket"]
        assert ticket.key == f"escalate:{key}" and ticket.status == "deduplicated"
        assert any(key in r and "OutcomeUnknown" in r for r in report.reasons), report.reasons

        before = await _events(temporal_env, cid)
        with pytest.raises(ResumeRefused) as refused:
            await resume(temporal_env.client, report)
        assert refused.value.reasons == report.reasons
        described = await temporal_env.client.get_workflow_handle(f"support-{cid}").describe()
        assert described.run_id == report.run_id and described.status == WorkflowExecutionStatus.RUNNING
        assert await _events(temporal_env, cid) == before  # nothing was changed

        # bad resolutions are refused; the state stays as it was
        for args, kind, words in (((cid, "no-such-step", "applied"), "resolution_refused", "has no step"),
                                  (("no-such-conversation", step.step_id, "applied"), "not_found", "does not exist"),
                                  ((cid, step.step_id, "maybe"), "invalid", "applied or not_applied")):
            with pytest.raises(ConversationError) as err:
                await client.resolve_outcome(*args, operator="op-1", note="checked the payments dashboard")
            assert err.value.kind == kind and words in str(err.value), str(err.value)
        # a message while an operator checks is refused as such, not as "finished: start a new
        # conversation" (which invites repeating a request whose outcome is being checked)
        with pytest.raises(ConversationError) as waiting:
            await client.send_message(cid, "hello? did it work?")
        assert waiting.value.kind == "conflict" and "A colleague is checking" in str(waiting.value)
        assert "new conversation" not in str(waiting.value) and cid not in str(waiting.value)
        intact = await client.state(cid)
        assert intact.status.value == "escalated" and intact.resolutions == []
        assert all(t.text != "hello? did it work?" for t in intact.recent_turns)

        resolution = await client.resolve_outcome(cid, step.step_id, "applied", operator="op-1",
                                                  note="found the change in the order system", actor="test")
        assert resolution.operator == "op-1" and resolution.actor == "test" and resolution.outcome == "applied"
        with pytest.raises(ConversationError) as twice:
            await client.resolve_outcome(cid, step.step_id, "not_applied", operator="op-2", note="second look")
        assert twice.value.kind == "resolution_refused" and "already resolved as applied by op-1" in str(twice.value)

        state = await client.state(cid)
        resolved = next(s for s in state.steps if s.step_id == step.step_id)
        assert resolved.status.value == "done" and state.status.value == "active" and state.ended_reason is None
        assert [(r.step_id, r.operator, r.note) for r in state.resolutions] == [
            (step.step_id, "op-1", "found the change in the order system")]
        assert state.recent_turns[-1].text == resolution.told and "went through" in resolution.told

        nxt = await client.send_message(cid, "thanks, anything else?")  # the conversation goes on from there
        assert nxt.status == "active" and nxt.text.startswith(resolution.told)

        after = await check(temporal_env.client, cid, systems)
        [write] = [e for e in after.effects if e.activity == "run_write_tool"]
        assert write.status == "resolved" and after.verdict == "resume", after.reasons
        systems.close()
        history = await temporal_env.client.get_workflow_handle(f"support-{cid}").fetch_history()
    # the wait, the resolution and what followed replay deterministically with today's code
    await Replayer(workflows=[SupportWorkflow, RefundWorkflow], data_converter=data_converter(),
                   workflow_runner=workflow_runner()).replay_workflow(history)


async def _died_after_commit(temporal_env, client, marker, prefix: str) -> str:
    """A conversation whose confirmed address change committed and whose run was then
    terminated before the write's answer (as a crashed run); returns its id."""
    cid = f"{prefix}-{uuid.uuid4().hex[:6]}"
    await client.start_conversation(cid)
    assert (await client.send_message(cid, f"my email is {EMAIL}, ship {PENDING} to Austin")).awaiting_confirmation
    yes = asyncio.create_task(client.send_message(cid, "yes"))
    for _ in range(200):
        if marker.exists():
            break
        await asyncio.sleep(0.05)
    assert marker.exists()  # committed; the activity has not answered
    await temporal_env.client.get_workflow_handle(f"support-{cid}").terminate("the run died before the write's answer")
    await asyncio.gather(yes, return_exceptions=True)
    return cid


async def test_a_run_that_died_after_its_write_is_resumed_and_completes_with_one_effect(
        temporal_env, settings, tmp_path):
    """A run terminated after its confirmed write committed and before the write's answer:
    the check says resume, the reset run answers the yes again (the write re-runs under its
    key, recorded, and the workflow words its outcome without a model call), the user's next
    message ends the conversation, and the ledger holds exactly one effect."""
    marker = tmp_path / "committed"
    brain = _brain({"kind": "end", "text": "Goodbye."})
    async with running_worker(temporal_env, settings, brain=brain, pause_after_write=(3.0, marker)) as (
            client, backend):
        cid = await _died_after_commit(temporal_env, client, marker, "replay-resume")

        systems = Systems(backend=backend)
        report = await check(temporal_env.client, cid, systems)
        systems.close()
        assert report.run_status == "terminated" and report.input_known
        [write] = [e for e in report.effects if e.activity == "run_write_tool"]
        assert write.ended == "in_flight" and write.status == "deduplicated"
        assert "retail ledger: recorded applied" in write.evidence
        assert report.verdict == "resume", report.reasons

        new_run = await resume(temporal_env.client, report)
        assert new_run != report.run_id
        for _ in range(100):  # the reset run answers the yes again: its write is replayed by key
            if any(op.tool == TOOL for op in (await client.state(cid)).completed_operations):
                break
            await asyncio.sleep(0.1)
        bye = await client.send_message(cid, "bye")
        assert bye.status == "ended" and bye.text == "Goodbye."
        outcome = await client.outcome(cid)
    [op] = [o for o in outcome.state.completed_operations if o.tool == TOOL]
    assert op.ok and op.idempotency_key == write.key
    told = [t.text for t in outcome.state.recent_turns if t.turn == 2 and t.role.value == "assistant"]
    assert len(told) == 1 and told[0].startswith("Your request is done:"), told  # the yes answered once
    assert [e["tool"] for e in backend.ledger_entries("main")] == [TOOL]  # exactly one effect
    assert backend.duplicate_writes("main") == 0


async def test_a_resume_under_a_waiting_message_leaves_its_outcome_unknown_and_a_stale_check_refused(
        temporal_env, settings, tmp_path):
    """Two resumes of one check at once reset once (the other is refused); a later one is
    refused too (the run changed since). The user's "yes"
    waiting on the reset run is not "finished, start a new conversation" (the reset run takes
    it again) but outcome unknown: the same message id then returns the reply, and the write
    applied once."""
    marker = tmp_path / "committed"
    brain = _brain(reply("Done."), reply("Done."), {"kind": "end", "text": "Goodbye."})
    async with running_worker(temporal_env, settings, brain=brain, pause_after_write=(3.0, marker)) as (
            client, backend):
        cid = f"replay-twice-{uuid.uuid4().hex[:6]}"
        await client.start_conversation(cid)
        assert (await client.send_message(cid, f"my email is {EMAIL}, ship {PENDING} to Austin")).awaiting_confirmation
        yes = asyncio.create_task(client.send_message(cid, "yes", message_id="m-yes"))
        for _ in range(200):
            if marker.exists():
                break
            await asyncio.sleep(0.05)
        assert marker.exists()
        systems = Systems(backend=backend)
        report = await check(temporal_env.client, cid, systems)
        assert report.verdict == "resume", report.reasons
        # two operators resuming the same check at once: one reset, both told its run
        runs = await asyncio.gather(resume(temporal_env.client, report), resume(temporal_env.client, report),
                                    return_exceptions=True)
        [new_run] = [r for r in runs if isinstance(r, str)]
        [refused] = [r for r in runs if isinstance(r, ResumeRefused)]
        assert new_run != report.run_id, runs
        assert "being resumed by another operator" in str(refused) or "another run since the check" in str(refused)
        assert (await temporal_env.client.get_workflow_handle(f"support-{cid}").describe()).run_id == new_run
        with pytest.raises(ResumeRefused) as stale:  # a second resume of the same check: the run changed
            await resume(temporal_env.client, report)
        assert "another run since the check" in str(stale.value)
        with pytest.raises(ConversationError) as unclear:
            await yes
        assert unclear.value.kind == "outcome_unknown" and "m-yes" in str(unclear.value), str(unclear.value)
        assert "restarted" in str(unclear.value) and "not reachable" not in str(unclear.value)
        again = await client.send_message(cid, "yes", message_id="m-yes")
        assert again.status == "active" and "new conversation" not in again.text
        systems.close()
    assert [e["tool"] for e in backend.ledger_entries("main")] == [TOOL]  # exactly one effect
    assert backend.duplicate_writes("main") == 0


async def test_a_check_the_run_has_moved_on_from_is_not_resumed(temporal_env, settings):
    """A check judges the history it read; a resume acting on it after the run went on (here
    one more message; in general a send without keys that started since, still in flight)
    would reset past events nobody judged. It is refused and nothing changes (a changed run,
    not only another run, is noticed)."""
    async with running_worker(temporal_env, settings, brain=_brain(reply("Nothing changed."))) as (client, backend):
        cid = f"replay-stale-{uuid.uuid4().hex[:6]}"
        await client.start_conversation(cid)
        assert (await client.send_message(cid, f"my email is {EMAIL}, ship {PENDING} to Austin")).awaiting_confirmation
        systems = Systems(backend=backend)
        report = await check(temporal_env.client, cid, systems)
        systems.close()
        assert report.verdict == "resume", report.reasons
        await client.send_message(cid, "no, leave it")
        before = await _events(temporal_env, cid)
        with pytest.raises(ResumeRefused) as stale:
            await resume(temporal_env.client, report)
        assert "moved on since the check" in str(stale.value)
        described = await temporal_env.client.get_workflow_handle(f"support-{cid}").describe()
        assert described.run_id == report.run_id and await _events(temporal_env, cid) == before


async def test_a_reset_that_failed_does_not_block_the_check(temporal_env, settings, tmp_path, monkeypatch):
    """A reset Temporal refused, or did not answer, releases the check's claim: the next
    resume resets, once; a claim still held refuses."""
    marker = tmp_path / "committed"
    async with running_worker(temporal_env, settings, brain=_brain(reply("Done.")),
                              pause_after_write=(3.0, marker)) as (client, backend):
        cid = await _died_after_commit(temporal_env, client, marker, "replay-claim")
        systems = Systems(backend=backend)
        report = await check(temporal_env.client, cid, systems)
        systems.close()
        assert report.verdict == "resume", report.reasons
        service = temporal_env.client.workflow_service
        real = service.reset_workflow_execution
        for status in (RPCStatusCode.FAILED_PRECONDITION, RPCStatusCode.UNAVAILABLE):
            async def failing(*_a, status=status, **_k):
                raise RPCError(f"{status.name} (injected)", status, b"")
            monkeypatch.setattr(service, "reset_workflow_execution", failing)
            with pytest.raises(RPCError):
                await resume(temporal_env.client, report)
        monkeypatch.setattr(service, "reset_workflow_execution", real)
        held = await _claim(temporal_env.client, report, "op-elsewhere")  # another operator, mid-resume
        with pytest.raises(ResumeRefused) as busy:
            await resume(temporal_env.client, report)
        assert "being resumed by another operator" in str(busy.value)
        await held.terminate("released")
        new_run = await resume(temporal_env.client, report)
        assert new_run != report.run_id
        assert (await temporal_env.client.get_workflow_handle(f"support-{cid}").describe()).run_id == new_run
        with pytest.raises(ResumeRefused):
            await resume(temporal_env.client, report)  # the run changed: never twice
        # a resume that read the run before that reset and got the claim after it was released:
        # its read again, under the claim, sees the reset
        from starter.ops import replay_resume  # noqa: PLC0415
        checks, unchanged = [], replay_resume._unchanged

        async def late(client_, report_):
            checks.append(1)
            if len(checks) > 1:
                await unchanged(client_, report_)
        monkeypatch.setattr(replay_resume, "_unchanged", late)
        with pytest.raises(ResumeRefused) as late_one:
            await resume(temporal_env.client, report)
        assert "another run since the check" in str(late_one.value) and len(checks) == 2
        assert (await temporal_env.client.get_workflow_handle(f"support-{cid}").describe()).run_id == new_run
