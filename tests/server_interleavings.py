"""Parts of the server-level property test of a conversation's invariants
(``tests/workflows/test_conversation_invariants_server.py``).

- ``Bridge``: hypothesis runs its rules in a thread; each rule hands a coroutine to the
  test's event loop (where the Temporal client and the worker live) and waits for it at
  most ``seconds``, so a hung rule fails the test with its name instead of stalling it.
- ``WatchPort``: the outermost tool port of the worker: it logs every write dispatched to
  the retail system (by idempotency key, in order) and can hold the next read of a tool
  (a ``Gate``) so a cancel can land while a confirmed write's before-image is being read.
- ``brain``: the offline rules model, taught one more request: a new shipping address for
  the pending order (a reversible write, the one with a read before it runs).
- ``Worker``: the in-process worker, stopped and started again on request (a restart:
  ``Worker`` shutdown, not a SIGKILL; ``test_crash_recovery`` covers SIGKILL).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import re
import threading
from collections import Counter
from typing import Any, Awaitable, Optional

from activities.ports import Guard
from settings import Settings
from systems.model.rules import rules_brain
from tests.faults import DelegatingPort
from tests.policy_fixtures import PENDING
from tests.port_faults import FaultyPort
from tests.workflow_harness import call, running_worker
from workflows.domain.policy.approvals import ApprovalPolicy
from workflows.domain.contracts import ToolResult

ADDRESSES = {
    "1 Main St": dict(address1="1 Main St", address2="", city="Austin", state="TX", country="USA", zip="78701"),
    "9 Elm St": dict(address1="9 Elm St", address2="", city="Austin", state="TX", country="USA", zip="78702"),
}
_ADDRESS_REQUEST = re.compile(r"shipping address of order #W\d+ to (1 Main St|9 Elm St)")


def address_request(street: str) -> str:
    """The user's request for a new shipping address of the pending order."""
    return f"Please change the shipping address of order {PENDING} to {street}."


def brain(view: dict, plan: Optional[dict] = None) -> dict:
    """``rules_brain``, plus: a request matching ``address_request`` proposes
    ``modify_pending_order_address`` once the pending order is read (once per turn: after a
    result or a rejection at this turn the rules brain answers)."""
    turn = view.get("turn", 0)
    users = [t for t in view.get("recent_turns") or [] if t.get("role") == "user"]
    asked = _ADDRESS_REQUEST.search(users[-1].get("text", "")) if users else None
    settled = any(op.get("turn") == turn for op in view.get("completed_operations") or []) or any(
        r.get("turn") == turn for r in view.get("rejections") or [])
    if (asked and not settled and not view.get("pending_confirmation") and view.get("customer")
            and PENDING in (view.get("orders") or {})):
        return call("modify_pending_order_address", order_id=PENDING, **ADDRESSES[asked.group(1)])
    return rules_brain(view, plan)


class Bridge:
    """Runs coroutines on ``loop`` (another thread's) from hypothesis's thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def run(self, what: str, coro: Awaitable[Any], seconds: float = 30.0) -> Any:
        """The coroutine's result; AssertionError naming ``what`` after ``seconds``."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(seconds)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise AssertionError(f"step {what!r} did not finish within {seconds:.0f} s") from None


class Gate:
    """Holds the next read of ``tool`` (a port call in an activity thread) until released."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.hit = threading.Event()
        self._released = threading.Event()

    def hold(self) -> None:
        self.hit.set()
        self._released.wait(60.0)

    def release(self) -> None:
        self._released.set()


class WatchPort(DelegatingPort):
    """A ``ToolPort`` around the worker's port: logs each write dispatch's idempotency key
    (``dispatched``, in order, retries included) and holds a read at an armed ``Gate``."""

    def __init__(self) -> None:
        self._inner: Any = None
        self.dispatched: list[str] = []
        self.gate: Optional[Gate] = None
        self._lock = threading.Lock()

    def attach(self, inner: Any) -> "WatchPort":
        """Delegate to ``inner`` (called at each worker start); returns self."""
        self._inner = inner
        return self

    def arm(self, tool: str) -> Gate:
        """Hold the next read of ``tool``; returns its gate."""
        self.gate = Gate(tool)
        return self.gate

    def invoke(self, store: str, tool: str, arguments: dict[str, Any], *, idempotency_key: Optional[str] = None,
               scope_user_id: Optional[str] = None, guard: Optional[Guard] = None) -> ToolResult:
        if idempotency_key is not None:
            with self._lock:
                self.dispatched.append(idempotency_key)
        else:
            gate = self.gate
            if gate is not None and gate.tool == tool:
                self.gate = None
                gate.hold()
        return super().invoke(store, tool, arguments, idempotency_key=idempotency_key, scope_user_id=scope_user_id,
                              guard=guard)


class Worker:
    """The test's in-process worker (offline ``brain``, real retail port behind ``faults``
    and ``watch``, the external ``services``), started, stopped and restarted on the loop."""

    def __init__(self, env: Any, settings: Settings, services: dict[str, str], policy: ApprovalPolicy) -> None:
        self.env, self.settings, self.services, self.policy = env, settings, services, policy
        self.faults = FaultyPort()
        self.watch = WatchPort()
        self.restarts = 0
        self._stack: Optional[contextlib.AsyncExitStack] = None

    async def start(self) -> None:
        """Start a worker (its first poll may follow a moment later)."""
        stack = contextlib.AsyncExitStack()
        await stack.enter_async_context(running_worker(
            self.env, self.settings, brain=brain, slow_reads=self.faults, approvals=self.policy,
            services=self.services, wrap_port=self.watch.attach))
        self._stack = stack

    async def stop(self) -> None:
        """Shut the worker down (running activities get the graceful shutdown time)."""
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

    async def restart(self) -> None:
        """Stop, then start again."""
        await self.stop()
        await self.start()
        self.restarts += 1


class World:
    """What every example shares: the loop bridge, the worker, a client, the databases
    ({"sor": retail, and each service's}) and the count of steps taken (printed)."""

    bridge: Bridge
    worker: Worker
    client: Any
    databases: dict[str, str]
    seen: Counter
