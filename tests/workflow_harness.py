"""Helpers to run conversations on the real Temporal server with a real worker, test
brains that fake the model at its boundary, and reads of the system of record."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Optional

from activities.store.journal import JournalStore
from activities.llm.model_activity import ModelActivities, offline_client
from activities.retail_port import RetailPort
from activities.tools import ToolActivities
from settings import Settings
from starter.client.conversations import StatekeeperClient
from systems.retail.backend import RetailBackend
from tests.faults import PauseAfterWrite, SlowReads
from starter.runtime.worker import build_backend, build_memory_port, build_tool_activities, build_worker
from workflows.domain.policy.approvals import ApprovalPolicy


NO_APPROVALS = ApprovalPolicy(threshold=Decimal("1000000"), refund_elsewhere_threshold=Decimal("1000000"))
"""A policy under which no τ-bench write needs a supervisor (above any order's amount)."""


@contextlib.asynccontextmanager
async def running_worker(env, settings: Settings, brain: Optional[Callable[[dict, Optional[dict]], dict]] = None,
                         pause_after_write: Optional[tuple[float, Path]] = None,
                         slow_reads: Optional[SlowReads] = None,
                         approvals: Optional[ApprovalPolicy] = None,
                         journal: Optional[JournalStore] = None,
                         services: Optional[dict[str, str]] = None,
                         wrap_port: Optional[Callable[[Any], Any]] = None,
                         local_model_calls: bool = False,
                         memory: Any = False,
                         conversation_memory: bool = True,
                         ) -> AsyncIterator[tuple[StatekeeperClient, RetailBackend]]:
    """A worker in this process; ``brain(view, plan)`` replaces the offline model's decisions
    (the model is the outside system we fake at its boundary; everything else is real). A
    test brain gets no plan (``plan`` is None); without one, the worker's own offline model
    answers, with the plan book on ``settings``' database. ``pause_after_write=(seconds,
    marker)`` pauses each applied write after its commit; ``slow_reads`` (a ``SlowReads``,
    attached here to this worker's port) slows chosen reads (``tests.faults``).
    The client starts conversations with ``approvals`` (default ``NO_APPROVALS``: tests of
    other subjects are not held up by supervisors; approval tests pass their policy). ``journal``
    replaces the worker's journal (default: the SQLite file ``settings`` names). ``services``
    ({name: base URL} of payments, email, ticketing) puts emails, tickets and money there.
    ``wrap_port(port)`` wraps the tool port last (a fault of ``tests.faults``).
    ``local_model_calls``: the client's conversations run model calls as local activities.
    ``memory``: True, the memory tools run on the memory store of ``settings``' journal (as the
    worker builds it); a port, on that port; False, nothing is remembered.
    ``conversation_memory``: the client's conversations start with memory on (``SupportInput.memory``)."""
    backend = build_backend(settings)
    model = None
    if brain is not None:
        model = ModelActivities(offline_client(30.0, brain=brain), model="test-brain", max_tokens=settings.model_max_tokens)
    port = RetailPort(backend)
    tool_port = PauseAfterWrite(port, *pause_after_write) if pause_after_write else port
    if slow_reads is not None:
        tool_port = slow_reads.attach(tool_port)
    if wrap_port is not None:
        tool_port = wrap_port(tool_port)
    memory_port = build_memory_port(settings) if memory is True else (memory or None)
    tools = ToolActivities(tools=tool_port, outbox=port, tickets=port, memory=memory_port)
    if services is not None:  # the external services (tests.service_fixtures) behind their adapters
        external = build_tool_activities(settings.model_copy(update={f"{n}_url": u for n, u in services.items()}),
                                         backend)
        tools = ToolActivities(tools=tool_port, outbox=external._outbox, tickets=external._tickets,
                               payments=external._payments, memory=memory_port)
    async with build_worker(env.client, settings, backend, model=model, tools=tools, journal=journal):
        yield StatekeeperClient(env.client, settings.task_queue, settings.write_timeout_seconds,
                                approvals=approvals or NO_APPROVALS, local_model_calls=local_model_calls,
                                memory=conversation_memory), backend


# --- test brains and reads of the system of record -----------------------------------


def call(name: str, **arguments) -> dict:
    """A tool-call proposal, as a test brain returns it."""
    return {"kind": "tool_call", "tool": {"name": name, "arguments": arguments}}


def reply(text: str) -> dict:
    """A reply proposal, as a test brain returns it."""
    return {"kind": "reply", "text": text}


class ListBrain:
    """Returns the queued actions in order, then replies 'ok'. Records every view."""

    def __init__(self, actions: list[dict]) -> None:
        self.actions = list(actions)
        self.views: list[dict] = []

    def __call__(self, view: dict, plan: dict | None = None) -> dict:
        self.views.append(view)
        return self.actions.pop(0) if self.actions else reply("ok")


def two_orders_brain() -> ListBrain:
    """The brain of ``conversation_over_runs``: authenticate and read one order, then another."""
    from tests.policy_fixtures import CUSTOMER, DELIVERED, EMAIL, PENDING  # noqa: PLC0415

    return ListBrain([call("find_user_id_by_email", email=EMAIL), call("get_user_details", user_id=CUSTOMER),
                      call("get_order_details", order_id=DELIVERED), reply("Found it."),
                      call("get_order_details", order_id=PENDING), reply("Found that one too.")])


async def conversation_over_runs(temporal: Any, settings: Settings, client: StatekeeperClient, prefix: str) -> str:
    """A conversation (id ``<prefix>-<hex>``, returned) that continued as new after each of its
    two turns (``max_turns_per_run=1``) on a worker running ``two_orders_brain``; asserts that it
    did, or a test built on it would prove nothing."""
    from tests.policy_fixtures import DELIVERED, EMAIL, PENDING  # noqa: PLC0415
    from workflows.domain.contracts import SupportInput  # noqa: PLC0415
    from workflows.conversation.workflow import SupportWorkflow  # noqa: PLC0415

    cid = f"{prefix}-{uuid.uuid4().hex[:6]}"
    await temporal.start_workflow(SupportWorkflow.run, SupportInput(conversation_id=cid, max_turns_per_run=1),
                                  id=f"support-{cid}", task_queue=settings.task_queue)
    await client.send_message(cid, f"Hi, my email is {EMAIL}; where is {DELIVERED}?")
    await client.send_message(cid, f"and {PENDING}?")
    runs = {w.run_id async for w in temporal.list_workflows(f"WorkflowId = 'support-{cid}'")}
    assert len(runs) >= 2, "no continue-as-new happened; the test would prove nothing"
    return cid


SLOW = {"kind": "slow"}
"""A brain step that thinks for a minute: a model call in flight."""


class Think:
    """A brain step that takes ``seconds`` before proposing ``action``."""

    def __init__(self, seconds: float, action: dict) -> None:
        self.seconds, self.action = seconds, action


class Script:
    """An awaitable brain: returns its steps in order (``SLOW`` sleeps 60 s first), then
    replies 'ok'. Counts calls and the calls that were cancelled mid-thought."""

    def __init__(self, steps: list[dict]) -> None:
        self.steps = list(steps)
        self.calls = 0
        self.cancelled = 0

    async def __call__(self, view: dict, plan: Optional[dict] = None) -> dict:
        self.calls += 1
        step = self.steps.pop(0) if self.steps else reply("ok")
        if isinstance(step, Think):
            await asyncio.sleep(step.seconds)
            return step.action
        if step is SLOW:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            return reply("too late")
        return step


async def until(predicate: Callable[[], Any], what: str, seconds: float = 20.0) -> None:
    """Poll ``predicate()`` (a value or an awaitable of one) every 0.1 s until it is true;
    AssertionError naming ``what`` after ``seconds``."""
    for _ in range(int(seconds * 10)):
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


async def refund_settled(client: StatekeeperClient, refund_id: str, seconds: float = 60.0) -> Any:
    """The standalone refund's status (``client.refund``) once it is neither running nor
    awaiting approval; ``AssertionError`` after ``seconds``."""
    for _ in range(int(seconds / 0.1)):
        status = await client.refund(refund_id)
        if status.status not in ("running", "awaiting_approval"):
            return status
        await asyncio.sleep(0.1)
    raise AssertionError(f"refund {refund_id} still running")


def order_details(backend: RetailBackend, order_id: str, store: str = "main") -> dict:
    """The order as the system of record holds it now."""
    return json.loads(backend.read(store, "get_order_details", {"order_id": order_id}))


def user_details(backend: RetailBackend, user_id: str, store: str = "main") -> dict:
    """The customer as the system of record holds them now."""
    return json.loads(backend.read(store, "get_user_details", {"user_id": user_id}))
