"""The τ-bench runner: drive one support conversation per task and check the outcome
against the benchmark.

Each task gets its own store (an isolated copy of the retail data in the system of
record). The task's ground-truth plan is registered with the offline stand-in model
(its ``PlanBook``, keyed by the conversation id) before the conversation starts; the
simulated user opens with who they are and a plain request, then answers "yes" to each
confirmation (with a real model the plan is registered but unused). A task passes when
the exported data hashes to ``gt_data_hash`` and every ``outputs`` string appears in
some assistant reply (lower-cased, commas removed). ``duplicate_writes`` is counted
from the system of record's ledger.

The runner is also the supervisor: when a reply says a confirmed write awaits approval
(``AssistantReply.awaiting_approval``), it approves it through the client as
``taubench-supervisor`` (the ground truth already says the write is wanted), waits until
the conversation has executed it, and counts it in ``approvals_granted``.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from typing import Any, Optional

from pydantic import BaseModel, Field

from starter.client.conversations import ConversationError, StatekeeperClient
from starter.client.transient import transient_retried
from starter.ops.taubench_tasks import Task, load_tasks, task_user  # load_tasks: re-exported for the CLI and tests
from systems.model.plans import PlanBook
from systems.retail.backend import RetailBackend
from workflows.domain.catalogue import READERS
from workflows.domain.contracts import AssistantReply
from workflows.domain.state import ConversationState, Role

MAX_USER_MESSAGES = 40
MAX_NUDGES = 3
"""Nudges ("Please continue.") in a row, with no confirmation asked in between, before a task
counts as stalled."""
SUPERVISOR = "taubench-supervisor"
"""The approver the runner decides approvals as (recorded in the conversation's state)."""
APPROVAL_DEADLINE_SECONDS = 120.0
"""How long the runner waits for an approved write to be executed before failing the task."""
APPROVAL_POLL_SECONDS = 0.2


class TaskResult(BaseModel):
    """One task's outcome; ``writes`` and ``duplicate_writes`` come from the ledger in the
    system of record, ``seconds`` is wall time of the whole task including grading."""

    task_index: int
    passed: bool
    hash_match: bool
    outputs_match: bool
    reason: str
    writes: int
    duplicate_writes: int
    seconds: float
    policy_refusals: list[str] = Field(default_factory=list)
    """Ground-truth actions our policy refused, each as ``tool: [rule] reason``."""
    approvals_granted: int = 0
    """Approvals the runner granted as the supervisor in this task."""
    model_calls: int = 0
    """Model calls the conversation made (its state's ``usage.model_calls``)."""
    user_messages: int = 0
    """The simulated user's messages: the opening, each yes, the goodbye; not the runner's
    "Please continue." nudges."""


class Summary(BaseModel):
    """Totals over a run; ``seconds`` is the wall time of the whole run."""

    total: int
    passed: int
    hash_match: int
    writes: int
    duplicate_writes: int
    seconds: float
    approvals_granted: int = 0
    model_calls: int = 0
    user_messages: int = 0
    model_calls_per_task: float = 0.0
    model_calls_per_message: float = 0.0
    """``model_calls`` / ``user_messages`` (0 when no message was sent)."""


class Report(BaseModel):
    """A run's summary and per-task results (the ``--json`` file)."""

    summary: Summary
    tasks: list[TaskResult]


def plan_of(user: dict[str, Any], task: Task) -> dict[str, Any]:
    """The plan the offline stand-in model follows: who the user is and the task's actions."""
    name = user["name"]
    return {
        "user": {"email": user["email"], "first_name": name["first_name"], "last_name": name["last_name"],
                 "zip": user["address"]["zip"]},
        "actions": task.actions,
    }


GOODBYE = "That's all, thank you."
"""What the simulated user says once what they came for is done (the stand-in then ends)."""
ORDER_ID = re.compile(r"#W[0-9]{7}\b", re.ASCII)


def opening_message(user: dict[str, Any], task: Optional[Task] = None) -> str:
    """The simulated user's first message: who they are and a plain request, naming the orders
    their instruction names (a user tells the order numbers they have; the ground-truth actions
    stay the model's to find)."""
    name = user["name"]
    named = list(dict.fromkeys(ORDER_ID.findall(task.instruction))) if task is not None else []
    orders = f" {', '.join(named)}" if named else ""
    return (f"Hi, I'm {name['first_name']} {name['last_name']}, my zip code is {user['address']['zip']} "
            f"and my email is {user['email']}. I need some help with my orders{orders}.")


def approval_settled(state: Any, approval_id: str) -> bool:
    """True once the conversation no longer waits on approval ``approval_id``: it has
    finished, or the approval is decided in its state and no step is still
    ``awaiting_approval``. ``state`` is the ``ConversationState`` (its ``approvals`` and
    ``steps``)."""
    if str(getattr(state.status, "value", state.status)) != "active":
        return True
    approval = next((a for a in getattr(state, "approvals", []) if a.approval_id == approval_id), None)
    if approval is None or str(getattr(approval.status, "value", approval.status)) == "pending":
        return False
    return not any(str(getattr(step.status, "value", step.status)) == "awaiting_approval" for step in state.steps)


def _normalise(text: str) -> str:
    return text.lower().replace(",", "")


def explain(task: Task, state: ConversationState) -> list[str]:
    """Ground-truth write actions the workflow refused, with the policy rule."""
    refusals = []
    for rejection in state.rejections:
        proposal = rejection.proposal or {}
        tool = (proposal.get("tool") or {}).get("name") or proposal.get("kind")
        for action in task.actions:
            if proposal.get("tool") == {"name": action["name"], "arguments": action["kwargs"]}:
                refusals.append(f"{tool}: [{rejection.rule}] {rejection.reason}")
                break
    return refusals


class TauBenchRunner:
    """Runs tasks through ``StatekeeperClient`` against the worker's backend database.

    ``plans`` is the offline model's plan book; it must be on the workers' database
    (``Settings.resolved_database_url()``). It defaults to one on ``backend``'s engine,
    which ``worker.build_backend`` builds from that URL. Its schema is created here.
    """

    def __init__(self, client: StatekeeperClient, backend: RetailBackend, *, run_id: Optional[str] = None,
                 keep_stores: bool = False, plans: Optional[PlanBook] = None,
                 approval_deadline_seconds: float = APPROVAL_DEADLINE_SECONDS) -> None:
        self._client = client
        self._backend = backend
        self._plans = plans or PlanBook(backend.engine)
        self._plans.create_schema()
        self._run_id = run_id or uuid.uuid4().hex[:8]
        self._keep = keep_stores
        self._approval_deadline = approval_deadline_seconds

    async def run_task(self, task: Task) -> TaskResult:
        """Run one task end to end; never raises for a task failure (it is reported)."""
        started = time.monotonic()
        store = conversation_id = f"tb-{self._run_id}-{task.task_index}"
        await asyncio.to_thread(self._backend.seed_store, store, replace=True)
        replies: list[str] = []
        user_messages = 0
        error: Optional[str] = None
        state: Optional[ConversationState] = None
        granted = 0
        try:
            user = task_user(await asyncio.to_thread(self._backend.read, store, READERS["user_id"],
                                                     {"user_id": task.user_id}), task)
            await asyncio.to_thread(self._plans.put, conversation_id, plan_of(user, task))
            # a start past its deadline may have started the run: sent again, it attaches to it
            # (the workflow id's conflict policy is use-existing) and its open update re-checks the store
            await transient_retried(lambda: self._client.start_conversation(conversation_id, store=store))
            sent, user_messages, sent_texts = 0, 1, []
            reply = await self._send(conversation_id, opening_message(user, task), sent)
            replies.append(reply.text)
            nudges = 0
            for _ in range(MAX_USER_MESSAGES):
                if reply.status != "active":
                    break
                if reply.awaiting_approval:
                    # the simulated user waits while the runner, as supervisor, approves
                    await self._approve(reply.awaiting_approval)
                    granted += 1
                    told, state = await self._await_executed(conversation_id, reply.awaiting_approval, replies)
                    replies += told
                    if not state.is_open():
                        break
                    text = "Please continue."
                elif reply.awaiting_confirmation:
                    text = "yes"
                    user_messages += 1
                    nudges = 0  # progress: only nudges in a row mean a stalled conversation
                elif GOODBYE not in sent_texts and await asyncio.to_thread(self._satisfied, store, task, replies):
                    # what the user came for is done and told: they say goodbye, as a user does
                    text = GOODBYE
                    user_messages += 1
                else:
                    nudges += 1
                    if nudges > MAX_NUDGES:
                        error = f"conversation stalled: {reply.text[:200]}"
                        break
                    text = "Please continue."
                sent += 1
                sent_texts.append(text)
                reply = await self._send(conversation_id, text, sent)
                replies.append(reply.text)
            state = await transient_retried(lambda: self._client.state(conversation_id))
        except ConversationError as err:
            error = f"conversation error: {err}"
        except LookupError as err:  # the task names no customer of the data: said, not a JSONDecodeError
            error = str(err)
        except Exception as err:  # noqa: BLE001 - one broken task must not abort the whole run
            error = f"{type(err).__name__}: {err}"
        data_hash = await asyncio.to_thread(self._backend.hash, store)
        ledger = await asyncio.to_thread(self._backend.ledger_entries, store)
        duplicates = await asyncio.to_thread(self._backend.duplicate_writes, store)
        if not self._keep:
            # the plan stays: a backtest of this conversation's calls asks the stand-in again,
            # and it answers from the same plan (the conversation id names the run and the task)
            await asyncio.to_thread(self._backend.drop_store, store)
        writes = sum(1 for row in ledger if row["ok"])
        hash_match = data_hash == task.gt_data_hash
        said = [_normalise(r) for r in replies]
        missing = [o for o in task.outputs if not any(_normalise(o) in r for r in said)]
        refusals = explain(task, state) if state else []
        passed = hash_match and not missing and error is None
        reasons = []
        if error:
            reasons.append(error)
        if not hash_match:
            reasons.append("final data hash differs from gt_data_hash")
        if missing:
            reasons.append(f"outputs missing from replies: {missing}")
        if refusals:
            reasons.append("policy refused ground-truth action(s): " + "; ".join(refusals))
        return TaskResult(task_index=task.task_index, passed=passed, hash_match=hash_match,
                          outputs_match=not missing, reason=" | ".join(reasons) or "ok", writes=writes,
                          duplicate_writes=duplicates, seconds=round(time.monotonic() - started, 3),
                          policy_refusals=refusals, approvals_granted=granted,
                          model_calls=state.usage.model_calls if state else 0, user_messages=user_messages)

    def _satisfied(self, store: str, task: Task, replies: list[str]) -> bool:
        """True when the store holds the task's expected data and every expected output was said."""
        said = [_normalise(r) for r in replies]
        return (all(any(_normalise(o) in r for r in said) for o in task.outputs)
                and self._backend.hash(store) == task.gt_data_hash)

    async def _send(self, conversation_id: str, text: str, n: int) -> AssistantReply:
        """User message ``n`` of the task, with a message id of its own, so a retry after a
        transient error (``transient_retried``) is handled once and answers the first reply."""
        return await transient_retried(lambda: self._client.send_message(conversation_id, text, message_id=f"u{n}"))

    async def _approve(self, approval_id: str) -> None:
        """Approve ``approval_id`` as ``SUPERVISOR``; raises ``ConversationError`` if refused."""
        await transient_retried(lambda: self._client.decide_approval(
            approval_id, "approve", SUPERVISOR, note="τ-bench runner: the task's ground truth includes this write"))

    async def _await_executed(self, conversation_id: str, approval_id: str,
                              said: list[str]) -> tuple[list[str], ConversationState]:
        """Wait until the conversation has executed the approved write (polling its state);
        returns the assistant's messages not in ``said`` (how the user was told the decision
        and the outcome) and the state. Raises ``TimeoutError`` after the deadline."""
        deadline = time.monotonic() + self._approval_deadline
        while True:
            state = await transient_retried(lambda: self._client.state(conversation_id))
            if approval_settled(state, approval_id):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"an approved write was not executed within {self._approval_deadline:g} s")
            await asyncio.sleep(APPROVAL_POLL_SECONDS)
        return [t.text for t in state.recent_turns if t.role is Role.ASSISTANT and t.text not in said], state

    async def run(self, tasks: list[Task], concurrency: int = 4, progress=None) -> Report:
        """Run ``tasks`` with at most ``concurrency`` conversations at once.
        ``progress`` (optional) is called with each finished ``TaskResult``."""
        started = time.monotonic()
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(task: Task) -> TaskResult:
            async with gate:
                try:
                    result = await self.run_task(task)
                except Exception as err:  # noqa: BLE001 - e.g. the database failed while grading
                    result = TaskResult(task_index=task.task_index, passed=False, hash_match=False,
                                        outputs_match=False, reason=f"runner error: {type(err).__name__}: {err}",
                                        writes=0, duplicate_writes=0, seconds=0.0)
            if progress is not None:
                progress(result)
            return result

        results = await asyncio.gather(*(one(t) for t in tasks))
        results = sorted(results, key=lambda r: r.task_index)
        summary = Summary(total=len(results), passed=sum(r.passed for r in results),
                          hash_match=sum(r.hash_match for r in results), writes=sum(r.writes for r in results),
                          duplicate_writes=sum(r.duplicate_writes for r in results),
                          seconds=round(time.monotonic() - started, 2),
                          approvals_granted=sum(r.approvals_granted for r in results),
                          model_calls=(calls := sum(r.model_calls for r in results)),
                          user_messages=(messages := sum(r.user_messages for r in results)),
                          model_calls_per_task=round(calls / len(results), 2) if results else 0.0,
                          model_calls_per_message=round(calls / messages, 2) if messages else 0.0)
        return Report(summary=summary, tasks=results)


def report_json(report: Report) -> dict[str, Any]:
    """The ``--json`` shape: ``{"summary": {...}, "tasks": [{...}, ...]}`` as in the README."""
    return report.model_dump()
