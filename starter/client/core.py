"""What every client call shares: the Temporal connection, the task queue, the
deadlines, and the check that a worker polls the queue.

Every call is bounded: each RPC carries ``rpc_timeout`` and is also wrapped in
``within`` (``asyncio.wait_for``; connection retries included), an update must be accepted by a
worker within ``accept_seconds`` and answered within ``reply_seconds``. When an update
is not accepted in time, ``DescribeTaskQueue`` tells "no worker polls this queue"
(``no_worker``) from "Temporal is slow or down" (``unavailable``), and the run's description
tells a run whose workflow tasks keep failing (``stuck``, ``starter.client.run_status``) from a
busy worker: such a run would never answer.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from typing import Any, Awaitable, Callable, Optional, TypeVar

from pydantic import BaseModel
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, TaskQueueKind, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest, GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowUpdateHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from starter.client.errors import ConversationError, no_worker, unreachable
from starter.client.run_status import description_stuck, stuck_error
from starter.runtime.rpc import read_again_if_dropped

T = TypeVar("T")
StuckCheck = Callable[[], Awaitable[Optional[ConversationError]]]
"""Returns the ``stuck`` refusal of the run an update waits on, or None (``ClientCore.stuck``)."""
UNCLEAR_RPC = (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED,
               RPCStatusCode.UNKNOWN, RPCStatusCode.INTERNAL)
"""RPC failures after which an update may or may not have reached the server."""


class Deadlines(BaseModel):
    """How long a client call may wait, in seconds."""

    rpc_seconds: float = 10.0
    """One RPC to the Temporal server (start, signal, query, describe, list)."""
    accept_seconds: float = 5.0
    """An update's acceptance by a worker; beyond it the queue's pollers are checked."""
    reply_seconds: float = 120.0
    """An accepted update's result (a turn: model calls and tools)."""
    poller_fresh_seconds: float = 70.0
    """A poller seen longer ago than this is gone (pollers long-poll for about a minute)."""


STUCK_SETTLE_SECONDS = 10.0
"""How long an update the server refused as "workflow not ready" (its workflow task failing)
waits to learn whether the run is stuck: the second problem in a row comes within one workflow
task timeout (4 s) of the first."""
STUCK_HISTORY_EVENTS = 200
"""How many of a stuck run's newest events ``ClientCore.stuck_since`` reads (one page)."""
POLLING_REUSE_SECONDS = 2.0
"""How long ``ClientCore.worker_polling``'s "a worker polls" stands without asking again; the
server's own answer is up to ``Deadlines.poller_fresh_seconds`` (70 s) old."""


async def within(call: Awaitable[T], seconds: float) -> T:
    """``asyncio.wait_for(call, seconds)`` that leaves nothing unread when the caller is
    cancelled (Ctrl-C or SIGTERM while a chat waits for a reply). The SDK ends a cancelled
    update RPC with its own error (``WorkflowUpdateRPCTimeoutOrCancelledError``) instead of
    ``CancelledError``; ``wait_for`` left it in the task it made for ``call``, and asyncio
    printed "Task exception was never retrieved" with its traceback after "stopped."."""
    task = asyncio.ensure_future(call)
    try:
        return await asyncio.wait_for(task, seconds)
    except asyncio.CancelledError:
        if task.done():
            _read(task)
        else:  # cancelled again while wait_for waited for the call to end
            task.add_done_callback(_read)
        raise


def _read(task: asyncio.Future) -> None:
    if not task.cancelled():
        task.exception()  # marks it retrieved; the caller's cancellation is what goes on


class ClientCore:
    """``ClientCore(client, task_queue, deadlines)``: the shared part of ``StatekeeperClient``."""

    def __init__(self, client: Client, task_queue: str, deadlines: Optional[Deadlines] = None) -> None:
        self._client = client
        self._task_queue = task_queue
        self.deadlines = deadlines or Deadlines()
        self._polled_check: Optional[asyncio.Future[bool]] = None
        self._polled_until = 0.0

    @property
    def task_queue(self) -> str:
        """The task queue this client starts workflows on."""
        return self._task_queue

    @property
    def rpc_timeout(self) -> timedelta:
        """``Deadlines.rpc_seconds`` as the SDK's ``rpc_timeout``."""
        return timedelta(seconds=self.deadlines.rpc_seconds)

    async def bounded(self, call: Awaitable[T], seconds: Optional[float] = None) -> T:
        """Await ``call`` for at most ``seconds`` (default: the RPC deadline plus a second of
        slack); past it, ``ConversationError`` ``unavailable``."""
        try:
            return await within(call, (seconds or self.deadlines.rpc_seconds) + 1.0)
        except asyncio.TimeoutError as err:
            raise unreachable() from err

    async def read(self, call: Callable[[], Awaitable[T]]) -> T:
        """``bounded(call())`` for an RPC that only reads (a describe, a query, a result, a page
        of a listing): when the connection dropped it in flight (CANCELLED, "operation was
        canceled": once in CI, a conversation then refused as "Temporal is not reachable") it
        is asked once more. Any other ``RPCError``, and a second drop, propagate as they are."""
        return await read_again_if_dropped(lambda: self.bounded(call()))

    async def run_serving(self, workflow_id: str) -> Optional[bool]:
        """Whether the latest run of ``workflow_id`` is running (True) or closed (False); None
        when it has no run. Raises ``temporalio.service.RPCError`` when Temporal does not answer."""
        handle = self._client.get_workflow_handle(workflow_id)
        try:
            described = await self.read(lambda: handle.describe(rpc_timeout=self.rpc_timeout))
        except RPCError as err:
            if err.status is RPCStatusCode.NOT_FOUND:
                return None
            raise
        return described.status is WorkflowExecutionStatus.RUNNING

    async def worker_polling(self) -> bool:
        """True if at least one worker polled the task queue for workflow tasks recently.
        Raises ``ConversationError`` ``unavailable`` when Temporal does not answer.

        Calls at the same time share one ``DescribeTaskQueue``, and a "yes" holds for
        ``POLLING_REUSE_SECONDS``: every conversation start asks, and at 200 starts at once
        asking each time would be one RPC to the server's matching service per conversation."""
        loop = asyncio.get_running_loop()
        if loop.time() < self._polled_until:
            return True
        if self._polled_check is None or self._polled_check.done() or self._polled_check.get_loop() is not loop:
            self._polled_check = asyncio.ensure_future(self._describe_pollers())
            # read here too: when every caller was cancelled, nobody else reads its failure
            self._polled_check.add_done_callback(_read)
        polling = await asyncio.shield(self._polled_check)
        if polling:
            self._polled_until = max(self._polled_until, loop.time() + POLLING_REUSE_SECONDS)
        return polling

    async def _describe_pollers(self) -> bool:
        request = DescribeTaskQueueRequest(
            namespace=self._client.namespace,
            task_queue=TaskQueue(name=self._task_queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
        try:
            response = await self.read(lambda: self._client.workflow_service.describe_task_queue(
                request, timeout=self.rpc_timeout))
        except RPCError as err:
            raise unreachable() from err
        oldest = datetime.now(timezone.utc) - timedelta(seconds=self.deadlines.poller_fresh_seconds)
        return any(p.last_access_time.ToDatetime(tzinfo=timezone.utc) >= oldest for p in response.pollers)

    async def require_worker(self) -> None:
        """Raise ``ConversationError`` ``no_worker`` unless a worker polls the queue (checked
        before starting anything, so a refused start leaves nothing behind)."""
        # a worker that has just started may not have polled yet: look again for a moment
        deadline = asyncio.get_running_loop().time() + self.deadlines.accept_seconds
        while not await self.worker_polling():
            if asyncio.get_running_loop().time() >= deadline:
                raise no_worker(self._task_queue)
            await asyncio.sleep(0.25)

    async def failure_of(self, workflow_id: str, error_type: str) -> Optional[str]:
        """The message of the failure that closed the latest run of ``workflow_id`` when that
        run failed with an ``ApplicationError`` of type ``error_type``; else None (running,
        closed otherwise, unknown, or Temporal did not answer: the caller's own refusal stands)."""
        handle = self._client.get_workflow_handle(workflow_id)
        try:
            description = await self.read(lambda: handle.describe(rpc_timeout=self.rpc_timeout))
            if description.status != WorkflowExecutionStatus.FAILED:
                return None
            await self.read(lambda: handle.result(follow_runs=False, rpc_timeout=self.rpc_timeout))
        except WorkflowFailureError as err:
            if isinstance(err.cause, ApplicationError) and err.cause.type == error_type:
                return err.cause.message
        except (RPCError, ConversationError):
            pass
        return None

    async def stuck(self, workflow_id: str, what: str, message_id: Optional[str] = None) -> Optional[ConversationError]:
        """The ``stuck`` refusal (``starter.client.run_status.stuck_error``) of ``workflow_id``'s latest
        run when its workflow tasks keep failing, worded for ``what`` ("conversation desk-43");
        else None, also when Temporal does not answer (the caller's own refusal stands). One
        describe RPC."""
        handle = self._client.get_workflow_handle(workflow_id)
        try:
            description = await self.read(lambda: handle.describe(rpc_timeout=self.rpc_timeout))
        except Exception:  # noqa: BLE001 - unreadable: not known to be stuck
            return None
        stuck, problems, attempt = description_stuck(description)
        if not stuck:
            return None
        since = await self.stuck_since(workflow_id, description.run_id)
        return stuck_error(what, problems, attempt, since, message_id)

    async def stuck_since(self, workflow_id: str, run_id: Optional[str]) -> Optional[datetime]:
        """When the run's current streak of failing workflow tasks began: the oldest workflow task
        failure or timeout after its last completed workflow task, read from the newest events
        back (at most ``STUCK_HISTORY_EVENTS``: the history of a stuck run can be large, and the
        attempts after the first of a streak are not written to it). None when unknown."""
        request = GetWorkflowExecutionHistoryReverseRequest(
            namespace=self._client.namespace, execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id or ""),
            maximum_page_size=STUCK_HISTORY_EVENTS)
        try:
            response = await self.read(lambda: self._client.workflow_service.get_workflow_execution_history_reverse(
                request, timeout=self.rpc_timeout))
        except Exception:  # noqa: BLE001 - the refusal stands without it
            return None
        first = None
        for event in response.history.events:  # newest first
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                break
            if event.event_type in (EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
                                    EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT):
                first = event.event_time.ToDatetime(tzinfo=timezone.utc)
        return first

    async def watched(self, call: Awaitable[T], seconds: float, stuck: Optional[StuckCheck]) -> T:
        """``within(call, seconds)``, asking ``stuck()`` every ``accept_seconds`` while ``call``
        has not finished: a refusal it returns is raised at once (``call`` is cancelled). A run
        whose workflow tasks keep failing never accepts nor answers an update: its caller would
        otherwise wait the whole reply deadline (120 s) for a 504."""
        if stuck is None:
            return await within(call, seconds)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        task = asyncio.ensure_future(call)
        try:
            while True:
                left = deadline - loop.time()
                done, _ = await asyncio.wait({task}, timeout=max(0.0, min(self.deadlines.accept_seconds, left)))
                if task in done:
                    return task.result()
                if left <= self.deadlines.accept_seconds:
                    raise asyncio.TimeoutError
                try:  # a look that outlasts the deadline (Temporal slowing down) leaves it as it was
                    refusal = await within(stuck(), max(0.1, deadline - loop.time()))
                except asyncio.TimeoutError:
                    refusal = None
                if refusal is not None:
                    raise refusal
        finally:
            if not task.done():
                task.cancel()
                task.add_done_callback(_read)

    async def _stuck_soon(self, stuck: StuckCheck) -> Optional[ConversationError]:
        """``stuck()``'s refusal, asked every second for ``STUCK_SETTLE_SECONDS``; None when the
        run is not stuck by then."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STUCK_SETTLE_SECONDS
        while True:
            refusal = await stuck()
            if refusal is not None or loop.time() >= deadline:
                return refusal
            await asyncio.sleep(1.0)

    async def run_update(self, start: Callable[[timedelta], Awaitable[WorkflowUpdateHandle[Any]]],
                         what: str, unknown: Optional[ConversationError] = None,
                         stuck: Optional[StuckCheck] = None) -> Any:
        """Send an update with ``start(rpc_timeout)`` (waiting for the ACCEPTED stage) and
        return its result. ``start`` must use the same update id on every call.

        Not accepted within ``accept_seconds``: ``no_worker`` when no worker polls the queue;
        else the worker is busy and the update may take up to ``reply_seconds`` to be
        accepted and as long again to answer, then ``timeout`` (sending the same update id
        again returns the result once it exists). Temporal unreachable: ``unavailable`` — or,
        when the update id comes from the caller, ``unknown`` (an ``errors.outcome_unknown``:
        it may have landed; the same id again is handled at most once). The run's workflow tasks
        keep failing: ``stuck()``'s refusal (asked once the update was not accepted in
        ``accept_seconds``, then every ``accept_seconds`` while it waits, and when the server
        refused the update as "not ready"). ``WorkflowUpdateFailedError``
        and other ``RPCError``s pass through for the caller."""
        try:
            return await self._run_update(start, what, stuck)
        except ConversationError as err:
            if unknown is not None and err.kind == "unavailable":
                raise unknown from err
            raise
        except RPCError as err:
            if unknown is not None and err.status in UNCLEAR_RPC:
                raise unknown from err
            raise

    async def _run_update(self, start: Callable[[timedelta], Awaitable[WorkflowUpdateHandle[Any]]],
                          what: str, stuck: Optional[StuckCheck] = None) -> Any:
        accept, reply = self.deadlines.accept_seconds, self.deadlines.reply_seconds
        try:
            try:
                handle = await within(start(timedelta(seconds=accept)), accept + 1.0)
            except (WorkflowUpdateRPCTimeoutOrCancelledError, asyncio.TimeoutError):
                try:
                    await self.require_worker()
                except ConversationError as refusal:
                    # Temporal holds the update: the run takes it when a worker polls again
                    raise ConversationError(f"{refusal}; {what} may still be handled once a worker runs: "
                                            "send it again with the same id to get its answer (it is handled "
                                            "once)", refusal.kind) from None
                refusal = await stuck() if stuck is not None else None
                if refusal is not None:  # a worker polls, but the run's workflow tasks keep failing
                    raise refusal
                # a worker polls, so it is busy, not absent: send the same update id again
                # (deduplicated) and allow it the reply deadline to be accepted
                handle = await self.watched(start(timedelta(seconds=reply)), reply + 1.0, stuck)
        except (WorkflowUpdateRPCTimeoutOrCancelledError, asyncio.TimeoutError) as err:
            raise ConversationError(f"{what} was not answered within {reply:.0f} s and may still be handled: "
                                    "send it again with the same id to get its answer (it is handled once)",
                                    "timeout") from err
        except RPCError as err:
            if err.status is RPCStatusCode.FAILED_PRECONDITION and stuck is not None:
                # the server refuses an update while the run's workflow task keeps failing ("not
                # ready"): whether it goes on is known within one workflow task timeout
                refusal = await self._stuck_soon(stuck)
                if refusal is not None:
                    raise refusal from err
            if err.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
                raise unreachable() from err
            raise
        try:
            return await self.watched(handle.result(rpc_timeout=timedelta(seconds=reply)), reply + 1.0, stuck)
        except (WorkflowUpdateRPCTimeoutOrCancelledError, asyncio.TimeoutError) as err:
            raise ConversationError(f"{what} is taking longer than {reply:.0f} s; send it again with the "
                                    "same id to get the answer", "timeout") from err
