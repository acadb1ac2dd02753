"""The τ-bench runner as supervisor, at unit level: a scripted stand-in for
``StatekeeperClient`` (the conversation side) in front of the real retail system of record
on SQLite. When a reply awaits approval the runner approves it as ``taubench-supervisor``,
waits (polling the state) until the write was executed, collects what the user was told,
and counts the approval; a write that never runs fails the task at the deadline, and a
refused approval fails it with the refusal.

The end-to-end runs (the 20 dev tasks through real conversations) are in
tests/e2e/test_taubench.py.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from types import SimpleNamespace
from typing import Optional

from starter.client.conversations import ConversationError
from starter.ops.taubench import SUPERVISOR, Task, TauBenchRunner, approval_settled, report_json
from systems.retail import load_data
from systems.retail.hashing import data_hash
from systems.retail.tools import run_tool
from workflows.domain.policy.approvals import Approval, ApprovalStatus
from workflows.domain.contracts import AssistantReply
from workflows.domain.state import ConversationState, Role, Step, StepStatus, Turn
from starter.runtime.worker import build_backend

ORDER = "#W4566809"  # 826.70: above the default threshold
CANCEL = {"name": "cancel_pending_order", "kwargs": {"order_id": ORDER, "reason": "no longer needed"}}
NOW = datetime(2026, 11, 29, tzinfo=timezone.utc)


def task() -> Task:
    data = load_data()
    run_tool(data, CANCEL["name"], CANCEL["kwargs"])
    return Task(task_index=3, user_id="raj_sanchez_2970", actions=[CANCEL], outputs=["826.70"],
                gt_data_hash=data_hash(data))


class ScriptedConversation:
    """Stands in for the client of one conversation whose cancel waits for approval: the
    write runs (on the real system of record) ``delay`` seconds after the approval, or
    never when ``delay`` is None; ``refuse`` makes the decision fail as the workflow would."""

    def __init__(self, backend, delay: float | None = 0.3, refuse: bool = False) -> None:
        self.backend, self.delay, self.refuse = backend, delay, refuse
        self.decisions: list[tuple[str, str, str]] = []
        self.sent: list[str] = []
        self.state_obj: ConversationState | None = None

    async def start_conversation(self, conversation_id: str, *, store: str = "main") -> str:
        self.store, self.cid = store, conversation_id
        self.approval_id = f"support-{conversation_id}~0123456789ab"
        self.state_obj = ConversationState(conversation_id=conversation_id, store=store, approvals=[Approval(
            approval_id=self.approval_id, workflow_id=f"support-{conversation_id}", operation_id="op.t2",
            digest="d", tool="cancel_pending_order", order_id=ORDER, amount=Decimal("826.70"),
            reasons=["[approval-threshold] ..."], requested_at=NOW, expires_at=NOW + timedelta(days=1))])
        self.state_obj.steps.append(Step(step_id="s1", name="cancel", status=StepStatus.AWAITING_APPROVAL, turn=2,
                                         operation_id="op.t2"))
        return conversation_id

    async def send_message(self, conversation_id: str, text: str, message_id: Optional[str] = None) -> AssistantReply:
        self.sent.append(text)
        if len(self.sent) == 1:
            return AssistantReply(text="Please confirm: cancel.", turn=1, status="active",
                                  awaiting_confirmation=f"Cancel order {ORDER}")
        if text == "yes":
            return AssistantReply(text="This needs a supervisor's approval; I will tell you.", turn=2,
                                  status="active", awaiting_approval=self.approval_id)
        return AssistantReply(text="Anything else? Goodbye.", turn=3, status="ended")

    async def decide_approval(self, approval_id: str, decision: str, approver: str, note=None) -> Approval:
        if self.refuse:
            raise ConversationError("this approval expired undecided", "approval_refused")
        self.decisions.append((approval_id, decision, approver))
        approval = self.state_obj.approvals[0]
        approval.status, approval.approver, approval.decided_at = ApprovalStatus.APPROVED, approver, NOW
        if self.delay is not None:
            asyncio.get_running_loop().call_later(self.delay, self._execute)
        return approval

    def _execute(self) -> None:
        self.backend.invoke(self.store, CANCEL["name"], CANCEL["kwargs"], idempotency_key="cancel:op.t2")
        self.state_obj.steps[0] = Step(step_id="s1", name="cancel", status=StepStatus.DONE, turn=2)
        self.state_obj.recent_turns.append(Turn(turn=2, role=Role.ASSISTANT,
                                                text="Approved: order cancelled, 826.70 refunded."))

    async def state(self, conversation_id: str) -> ConversationState:
        return self.state_obj.model_copy(deep=True)


async def test_runner_approves_waits_for_the_write_and_counts_it(settings):
    backend = build_backend(settings)
    client = ScriptedConversation(backend)
    report = await TauBenchRunner(client, backend, run_id="sup").run([task()])
    [result] = report.tasks
    assert result.passed and result.hash_match and result.outputs_match, result.reason
    assert result.approvals_granted == 1 and report.summary.approvals_granted == 1
    assert client.decisions == [(client.approval_id, "approve", SUPERVISOR)]
    assert client.sent == [client.sent[0], "yes", "Please continue."]  # it waited, then went on
    assert report_json(report)["summary"]["approvals_granted"] == 1


async def test_an_approved_write_that_never_runs_fails_the_task_at_the_deadline(settings):
    backend = build_backend(settings)
    client = ScriptedConversation(backend, delay=None)
    runner = TauBenchRunner(client, backend, run_id="late", approval_deadline_seconds=0.5)
    [result] = (await asyncio.wait_for(runner.run([task()]), 30)).tasks
    assert not result.passed and not result.hash_match
    assert "an approved write was not executed within 0.5 s" in result.reason
    assert result.approvals_granted == 1 and client.sent[-1] == "yes"


async def test_a_refused_approval_fails_the_task_with_the_refusal(settings):
    backend = build_backend(settings)
    client = ScriptedConversation(backend, refuse=True)
    [result] = (await TauBenchRunner(client, backend, run_id="ref").run([task()])).tasks
    assert not result.passed and result.approvals_granted == 0
    assert "conversation error: this approval expired undecided" in result.reason


def test_settled_only_when_decided_and_no_step_awaits_approval():
    approval = SimpleNamespace(approval_id="a~0123456789ab", status=ApprovalStatus.PENDING)
    waiting = SimpleNamespace(status=StepStatus.AWAITING_APPROVAL)
    state = SimpleNamespace(status="active", approvals=[approval], steps=[waiting])
    assert not approval_settled(state, "a~0123456789ab")
    approval.status = ApprovalStatus.APPROVED
    assert not approval_settled(state, "a~0123456789ab")          # decided, not yet executed
    state.steps = [SimpleNamespace(status=StepStatus.DONE)]
    assert approval_settled(state, "a~0123456789ab")
    assert not approval_settled(state, "b~0123456789ab")          # another approval: not this one
    state.status = "ended"
    assert approval_settled(state, "b~0123456789ab")              # a finished conversation waits for nothing
