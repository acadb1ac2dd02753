"""Invariants of a conversation over generated interleavings, on the server (the smaller
version of ``tests/core/conversation_invariants_machine.py``).

A hypothesis ``RuleBasedStateMachine`` drives real ``SupportWorkflow`` conversations on
the Temporal dev server with a real in-process worker (the offline rules model, taught
one address change: ``tests.server_interleavings.brain``), the retail system on SQLite
and the payments, email and ticketing services over HTTP. Each example gets a fresh store
of the τ-bench data; a supervisor approval is needed for every cancel of the pending
order (threshold 100.00); a run continues as new every 4 turns.

Steps (one rule picks among those meaningful now) are whole user, supervisor or operator
actions: ask for a write (cancel the pending order, or a new address), yes (retried with
its message id, or with a fault armed on its write), no, a benign message, approve or
reject, a yes raced by a cancel at its before-image read, the last message resent; once an
example each: a worker restart (in-process, not SIGKILL), a reset to the workflow task that
took one of the last messages (then sent again), a cancel with and without rollback.

After every step (``tests.server_invariants``): (a) no write without the user's yes to
its exact detail (and a supervisor's approval where one is needed); (b) at most one
applied effect per key in the retail ledger, payments, email and ticketing; (c) nothing
new starts after a cancel except compensations; (e) the user is never told an effect
happened that did not; and, at the end of each example, (d) every confirmed write ended
applied, refused with a reason, escalated or withdrawn. Every step runs under a timeout.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections import Counter
from decimal import Decimal

from hypothesis import HealthCheck, Phase, settings as hsettings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from starter.client.conversations import StatekeeperClient
from systems.fleet import sqlite_databases
from tests.policy_fixtures import EMAIL, PENDING
from tests.resets import message_points, reset_to
from tests.server_interleavings import Bridge, Worker, World, address_request
from tests.server_invariants import Cancel, Record, check_settled, check_step
from tests.service_fixtures import arm, services  # noqa: F401 - fixture
from tests.workflow_harness import until
from starter.runtime.worker import build_backend
from workflows.domain.policy.approvals import ApprovalPolicy
from workflows.domain.contracts import SupportInput
from workflows.options import CONVERSATION_TASK_TIMEOUT
from workflows.domain.state import StepStatus
from workflows.conversation.workflow import SupportWorkflow, support_workflow_id

POLICY = ApprovalPolicy(threshold=Decimal("100.00"))
BENIGN = "I have a question about my orders."
CANCEL_REQUEST = f"Please cancel order {PENDING}, I ordered it by mistake."
FAULTS = ("http_5xx", "fail_before_commit", "commit_then_drop", "answer_after_timeout")
STEP_SECONDS = 45.0
ANSWERS = ("yes", "yes, retried", "benign", "yes with a fault", "no", "resend", "yes")


def _request(what: str) -> str:
    """The user's request for a write: ``cancel`` the pending order, or a new street."""
    return CANCEL_REQUEST if what == "cancel" else address_request(what)


class ServerConversation(RuleBasedStateMachine):
    """Conversations on one fresh store; a cancelled one is followed by a new one."""

    world: World

    def __init__(self) -> None:
        super().__init__()
        w = self.world
        self.worker, self.client, self.on_loop = w.worker, w.client, w.bridge.run
        self.backend = build_backend(w.worker.settings)
        self.record = Record()
        self.store = f"sm-{uuid.uuid4().hex[:8]}"
        self.backend.seed_store(self.store)
        self.worker.faults._armed.clear()  # a fault of an earlier example that nothing consumed
        self.state, self.shown, self.log = None, None, []
        self.chances = ["restart", "reset", "cancel with rollback", "cancel"]  # operator steps left, once each

    async def _state(self):
        self.state = await self.client.state(self.cid)
        return self.state

    async def _send(self, text: str, message_id: str | None = None):
        message_id = message_id or uuid.uuid4().hex[:12]
        if text == "yes" and self.shown is not None:
            pending = (await self._state()).pending_confirmation
            if pending is not None and pending.detail == self.shown:
                self.record.confirmed[(pending.operation_id, pending.call.name)] = pending.detail
        reply = await self.client.send_message(self.cid, text, message_id)
        self.log.append((text, message_id, reply))
        self.shown = reply.awaiting_confirmation
        await self._settled()
        return reply

    async def _settled(self) -> None:
        """Until no step of the conversation is running (an approved write, a reset's turn)."""
        async def idle() -> bool:
            return not any(s.status is StepStatus.RUNNING for s in (await self._state()).steps)
        await until(idle, "the conversation to be idle", 30.0)

    def _check(self, what: str = "") -> None:
        self.world.seen[what or inspect.stack()[1].function] += 1  # what the examples reached (printed)
        self.on_loop("invariants", self._state())
        check_step(self.record, self.backend, self.store, self.state, self.worker.watch.dispatched,
                   self.world.databases)

    def is_open(self) -> bool:
        return self.state is not None and self.state.is_open()

    def asked(self, tool: str) -> bool:
        pending = self.state.pending_confirmation if self.is_open() else None
        return self.shown is not None and pending is not None and pending.call.name == tool

    # --- conversations ------------------------------------------------------------
    async def _start(self, what: str) -> None:
        self.cid, self.log, self.shown = f"sm-{uuid.uuid4().hex[:10]}", [], None
        inp = SupportInput(conversation_id=self.cid, store=self.store, write_timeout_seconds=3.0,
                           max_turns_per_run=4, approvals=POLICY)
        await self.client.require_worker()
        await self.world.worker.env.client.start_workflow(
            SupportWorkflow.run, inp, id=support_workflow_id(self.cid), task_queue=self.worker.settings.task_queue,
            task_timeout=CONVERSATION_TASK_TIMEOUT)
        await self._send(f"Hi, my email is {EMAIL}")
        await self._send(_request(what))

    @initialize(what=st.sampled_from(["1 Main St", "cancel"]))
    def start(self, what: str) -> None:
        """A conversation that identified the customer and has a write shown."""
        self.on_loop("start a conversation", self._start(what), STEP_SECONDS)
        self._check()

    # --- the user -------------------------------------------------------------------
    def answer(self, kind: str, fault: str) -> None:
        """The user answers the write shown: yes (with ``fault`` armed on that write, or on
        the payments service for a cancel, when asked; or sent again with its message id,
        as a client retries when the reply was lost), no, a benign message, or the last
        message sent again with its id."""
        if kind == "resend":
            self._resend()
        elif kind == "yes, retried":
            self.on_loop("answer 'yes'", self._send("yes"), STEP_SECONDS)
            self._resend()
        else:
            if kind == "yes with a fault":
                tool = self.state.pending_confirmation.call.name
                self._fault(fault, "payments" if tool == "cancel_pending_order" and fault != "http_5xx" else tool)
            text = BENIGN if kind == "benign" else "no" if kind == "no" else "yes"
            self.on_loop(f"answer {text!r}", self._send(text), STEP_SECONDS)
        self._check(kind)

    def _resend(self) -> None:
        text, message_id, first = self.log[-1]
        turn = self.state.turn

        async def again():
            return await self.client.send_message(self.cid, text, message_id), (await self._state()).turn
        reply, now = self.on_loop("resend the last message", again(), STEP_SECONDS)
        assert reply == first, f"a resent message got another reply: {first.text!r} then {reply.text!r}"
        assert now == turn, f"a resent message was handled again (turn {turn} became {now})"

    def _yes_while_cancelled(self) -> None:
        """A yes to an address change, its before-image read held, then a cancel: that write must never start."""
        gate = self.worker.watch.arm("get_order_details")
        async def race():
            sending = asyncio.ensure_future(self._send("yes"))
            try:
                await until(gate.hit.is_set, "the before-image read", 20.0)
                self.record.cancels.append(Cancel(self.cid, len(self.worker.watch.dispatched)))
                await self.client.cancel(self.cid, "the customer hung up")
                try:
                    await asyncio.wait_for(asyncio.shield(self.client.outcome(self.cid)), 8.0)
                except asyncio.TimeoutError:
                    pass  # the held read was not cancelled: let it go and see what follows
            finally:
                gate.release()
                self.worker.watch.gate = None
            await asyncio.wait_for(self.client.outcome(self.cid), 30.0)
            await asyncio.wait_for(sending, 30.0)
            await self._state()
        self.on_loop("yes, then a cancel during the before-image read", race(), STEP_SECONDS)

    # --- the supervisor -----------------------------------------------------------
    def decide(self, decision: str) -> None:
        approval = self.state.pending_approvals()[-1]

        async def decide():
            await self.client.decide_approval(approval.approval_id, decision, "sup-ana")
            if decision == "approve":
                self.record.approved.add(approval.operation_id)
            await until(lambda: self._no_wait(approval.operation_id), "the decision to be settled", 30.0)
            await self._settled()
        self.on_loop(f"{decision} {approval.tool}", decide(), STEP_SECONDS)
        self._check(decision)

    async def _no_wait(self, operation_id: str) -> bool:
        return not any(s.operation_id == operation_id and s.status is StepStatus.AWAITING_APPROVAL
                       for s in (await self._state()).steps)

    # --- operators: cancels, restarts, resets, faults (each at most once an example) ---
    def operator(self, pick: int) -> None:
        kind = self.chances.pop(pick % len(self.chances))
        if kind.startswith("cancel"):
            self._cancel(rollback=kind == "cancel with rollback")
        elif kind == "restart":
            self.on_loop("restart the worker", self.worker.restart(), STEP_SECONDS)
        else:
            self.on_loop("reset, then send the wiped messages again", self._reset(1 + pick % 3), 2 * STEP_SECONDS)
        self._check(kind)

    def _cancel(self, rollback: bool) -> None:
        async def cancel():
            self.record.cancels.append(Cancel(self.cid, len(self.worker.watch.dispatched)))
            await self.client.cancel(self.cid, "the customer hung up", rollback=rollback)
            await asyncio.wait_for(self.client.outcome(self.cid), 30.0)
            await self._state()
        self.on_loop("cancel", cancel(), STEP_SECONDS)

    async def _reset(self, back: int) -> None:
        wid = support_workflow_id(self.cid)
        points = await message_points(self.world.worker.env, wid)
        if not points:
            return  # this run (after a continue-as-new) has no message to go back before
        await reset_to(self.world.worker.env, wid, points[-min(back, len(points))])
        await self._settled()
        kept = self.state.turn
        wiped = [text for text, _, reply in self.log if reply.turn > kept]
        self.log = [entry for entry in self.log if entry[2].turn <= kept]
        self.shown = self.state.pending_confirmation.detail if self.state.pending_confirmation else None
        for text in wiped:
            await self._send(text)

    def _fault(self, fault: str, where: str) -> None:
        """A fault on the next write of ``where`` (a retail tool) or money movement."""
        if where == "payments":
            arm(self.worker.services["payments"], fault)
        else:
            self.worker.faults.arm(where, fault)

    @rule(pick=st.integers(0, 63), arg=st.integers(0, 63))
    def step(self, pick: int, arg: int) -> None:
        """One step among those meaningful now (``pick``), with its argument (``arg``): one rule
        without preconditions draws the same data whatever the server's timing (a precondition
        per rule did not: FlakyStrategyDefinition)."""
        shown, closed = self.is_open() and self.shown is not None, self.state is not None and not self.is_open()
        enabled = [name for name, ok in (
            ("new_conversation", closed), ("ask_for_a_write", self.is_open() and self.shown is None),
            ("answer", shown), ("yes_while_cancelled", self.asked("modify_pending_order_address")),
            ("decide", self.is_open() and bool(self.state.pending_approvals())),
            ("operator", self.is_open() and bool(self.chances))) if ok]
        if not enabled:
            return
        name = enabled[pick % len(enabled)]
        if name == "new_conversation":
            self.on_loop("start another conversation", self._start(["cancel", "9 Elm St"][arg % 2]), STEP_SECONDS)
            self._check(name)
        elif name == "ask_for_a_write":
            what = ["cancel", "1 Main St", "9 Elm St"][arg % 3]
            self.on_loop(f"ask for {what}", self._send(_request(what)), STEP_SECONDS)
            self._check(name)
        elif name == "answer":
            self.answer(ANSWERS[arg % len(ANSWERS)], FAULTS[arg // len(ANSWERS) % len(FAULTS)])
        elif name == "yes_while_cancelled":
            self._yes_while_cancelled()
            self._check(name)
        elif name == "decide":
            self.decide(["approve", "reject", "approve"][arg % 3])
        else:
            self.operator(arg)

    def teardown(self) -> None:
        if self.state is not None:
            self.on_loop("settle at the end", self._settled(), STEP_SECONDS)
            self._check()
            check_settled(self.record, self.state)
        self.world.seen[f"examples reaching {self.record.applied} applied write(s)"] += 1
        self.world.seen["approvals asked"] += len(self.state.approvals) if self.state else 0


async def test_conversation_invariants_hold_on_the_server(temporal_env, settings, services, tmp_path):  # noqa: F811
    fast = settings.model_copy(update={"write_timeout_seconds": 3.0})
    world = World()
    world.bridge = Bridge(asyncio.get_running_loop())
    world.worker = Worker(temporal_env, fast, services, POLICY)
    world.client = StatekeeperClient(temporal_env.client, fast.task_queue, 3.0, approvals=POLICY)
    world.databases = {"sor": fast.database_url, **sqlite_databases(tmp_path)}
    world.seen = Counter()
    ServerConversation.world = world
    await world.worker.start()
    try:
        await asyncio.to_thread(run_state_machine_as_test, ServerConversation, settings=hsettings(
            max_examples=10, stateful_step_count=8, derandomize=True, deadline=None, database=None,
            phases=[Phase.explicit, Phase.generate], report_multiple_bugs=False,
            suppress_health_check=list(HealthCheck)))
    finally:
        await world.worker.stop()
        print(f"steps: {dict(world.seen)}; fault hits: {world.worker.faults.hits}")
