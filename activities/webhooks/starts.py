"""Starting delivery workflows from the outbox (``activities.store.webhooks``).

``DeliveryStarter.notify`` is the journal's hook (``JournalStore.on_deliveries``): right after a
commit that enqueued deliveries it starts their workflows in the background, on the worker's
event loop, so an event reaches its receivers without waiting for a sweep, and the activity
that stored it does not wait for Temporal. A start that fails (Temporal unreachable, the worker
killed between the commit and the start) leaves the row unstarted, and the sweeper
(``WebhookSweepWorkflow``, ``sweep``) starts it within a sweep interval. Starting twice is
harmless: the workflow id is the delivery's, and Temporal refuses a second run under it while
the first runs or is retained (``REJECT_DUPLICATE``); a manual retry alone starts a new run.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Optional

from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from activities.store.webhooks import WebhookStore
from workflows.webhooks.workflow import DeliveryInput, RetrySchedule, WebhookDeliveryWorkflow, delivery_workflow_id

log = logging.getLogger("statekeeper.webhooks")

STARTS_AT_ONCE = 16
"""Start requests in flight at once from one process."""


class DeliveryStarter:
    """Starts delivery workflows on ``task_queue`` with ``retry``, and notes them started in ``store``."""

    def __init__(self, client: Client, task_queue: str, store: WebhookStore, retry: RetrySchedule) -> None:
        self.client, self.task_queue, self.store, self.retry = client, task_queue, store, retry
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._tasks: set[asyncio.Task] = set()
        self._gate: Optional[asyncio.Semaphore] = None

    def bind(self) -> None:
        """Remember the running event loop: ``notify`` hands starts to it from other threads."""
        self._loop = asyncio.get_running_loop()

    def notify(self, keys: list[tuple[str, str]]) -> None:
        """Start the deliveries ``keys`` in the background (thread-safe, never raises or blocks)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return  # the sweep starts them
        try:
            loop.call_soon_threadsafe(self._spawn, list(keys))
        except RuntimeError:
            pass  # the loop is closing: the sweep starts them

    def _spawn(self, keys: list[tuple[str, str]]) -> None:
        task = asyncio.ensure_future(self.start(keys))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def start(self, keys: list[tuple[str, str]]) -> int:
        """Start the workflows of ``keys`` (those that exist already count as started) and note
        them started; returns how many were noted. Failures are logged (ids and the error's
        type only) and leave their rows to the sweep."""
        if self._gate is None:
            self._gate = asyncio.Semaphore(STARTS_AT_ONCE)
        started = await asyncio.gather(*(self._start_one(webhook_id, event_id) for webhook_id, event_id in keys))
        done = [key for key, ok in zip(keys, started) if ok]
        try:
            await asyncio.to_thread(self.store.started, done)
        except Exception as err:  # noqa: BLE001 (the sweep finds them again; a second start is refused)
            log.warning("webhooks: %d started deliveries not noted: %s", len(done), type(err).__name__)
        return len(done)

    async def _start_one(self, webhook_id: str, event_id: str) -> bool:
        assert self._gate is not None
        async with self._gate:
            try:
                await self.client.start_workflow(
                    WebhookDeliveryWorkflow.run, DeliveryInput(webhook_id=webhook_id, event_id=event_id,
                                                               retry=self.retry),
                    id=delivery_workflow_id(webhook_id, event_id), task_queue=self.task_queue,
                    id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                    id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                    rpc_timeout=timedelta(seconds=10))
            except WorkflowAlreadyStartedError:
                pass  # started before (this one's twin, or the sweep): that run delivers it
            except Exception as err:  # noqa: BLE001 (any failure: the sweep starts it later)
                log.warning("webhooks: delivery %s of %s not started: %s", event_id, webhook_id, type(err).__name__)
                return False
        return True

    async def restart(self, webhook_id: str, event_id: str) -> None:
        """Start delivery (``webhook_id``, ``event_id``) again now, as a new run under the same
        workflow id (a run still waiting between attempts is replaced). Raises the client's
        ``RPCError`` when Temporal does not answer."""
        await self.client.start_workflow(
            WebhookDeliveryWorkflow.run, DeliveryInput(webhook_id=webhook_id, event_id=event_id, retry=self.retry),
            id=delivery_workflow_id(webhook_id, event_id), task_queue=self.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.TERMINATE_EXISTING,
            rpc_timeout=timedelta(seconds=10))
        await asyncio.to_thread(self.store.started, [(webhook_id, event_id)])

    async def sweep(self, grace: timedelta, limit: int = 500) -> int:
        """Start the deliveries unstarted for ``grace`` or more (at most ``limit``); returns how many."""
        keys = await asyncio.to_thread(self.store.unstarted, grace, limit)
        return await self.start(keys) if keys else 0
