"""The approval changes of one tenant, shared by every supervisor's inbox page of that tenant.

A ``TenantFeed`` keeps the tenant's pending approvals as Temporal reports them (the
``PendingApproval`` search attribute of running processes, ``ListingCalls.pending_approval_runs``,
within the tenant's visibility clauses) and tells its subscribers what changed:

- ``approval.requested``: an approval that was not pending before (with its ``ApprovalItem``,
  read once from its process, and its customer's ``CustomerId`` pseudonym);
- ``approval.decided``, ``approval.expired``, ``approval.withdrawn``: an approval that left the
  list, read again from its process to say how (approved or rejected, by whom and when; expired
  undecided; withdrawn because its process closed). One that left the list but reads as still
  pending (visibility lags behind the process) stays until its process says otherwise.

One feed runs per tenant and API process while at least one page listens, however many
supervisors do: it asks visibility once every ``FEED_SECONDS`` and reads each process only when
its approval appears or leaves, so a second supervisor costs one more queue, not more
Temporal calls. Why visibility rather than the journal's events: it is the authority on what is
still pending, it covers a standalone refund's approvals as well as a conversation's, and it
carries the tenant of each process (the journal's events do not).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Awaitable, Callable, NamedTuple, Optional

from starter.client.approvals import ApprovalItem
from starter.client.conversations import StatekeeperClient
from starter.client.errors import ConversationError
from starter.client.listing import MAX_PAGE
from workflows.domain.policy.approvals import ApprovalStatus

log = logging.getLogger("statekeeper.api.inbox")

FEED_SECONDS = 1.0
"""How often a listened-to feed asks visibility for its tenant's pending approvals."""
IDLE_SECONDS = 30.0
"""How long a feed keeps running with no page listening (a page reloading rejoins it)."""
MAX_PAGES = 5
"""Pages of ``MAX_PAGE`` pending approvals a feed follows (the inbox lists at most 500)."""
QUEUE_SIZE = 1000
"""Changes a page may fall behind by; past it the page's stream ends and it reconnects afresh."""
READ_SECONDS = 5.0
"""How long a feed waits for one process's answer when an approval left the list."""
REREAD_SECONDS = 15.0
"""How often a feed asks again a process that could not be read (each ask may wait
``starter.client.approvals.LIST_READ_SECONDS``)."""

TYPE_OF = {ApprovalStatus.APPROVED: "approval.decided", ApprovalStatus.REJECTED: "approval.decided",
           ApprovalStatus.EXPIRED: "approval.expired", ApprovalStatus.WITHDRAWN: "approval.withdrawn"}


class InboxItem(NamedTuple):
    """An approval as the inbox shows it: ``item`` as ``GET /approvals/{approval_id}`` reads
    it, its process's workflow id (for the Web UI link) and customer's pseudonym (None: not
    known yet)."""

    item: ApprovalItem
    workflow_id: str
    customer: Optional[str]


class Change(NamedTuple):
    """One change a feed tells its subscribers: ``type`` (``approval.requested``,
    ``approval.decided``, ``approval.expired``, ``approval.withdrawn``) and the approval; or
    ``inbox.status`` (no approval) when ``TenantFeed.trouble`` changed."""

    type: str
    approval: Optional[InboxItem]


class TenantFeed:
    """``TenantFeed(ensure_client, scope)``: the pending approvals within the visibility
    ``scope`` clauses (a tenant's), followed while anyone subscribes."""

    def __init__(self, ensure_client: Callable[[], Awaitable[StatekeeperClient]], scope: list[str]) -> None:
        self._ensure_client, self._scope = ensure_client, scope
        self.pending: dict[str, InboxItem] = {}
        """Approval id → the approval, as of the last look (insertion order: first seen first)."""
        self.synced = asyncio.Event()
        """Set once ``pending`` holds what visibility listed at least once."""
        self.trouble: Optional[str] = None
        """Why the last look failed (None: it did not), in words for the page."""
        self._subscribers: set[asyncio.Queue[Optional[Change]]] = set()
        self._unread: dict[str, float] = {}
        """Approval id → when its process was last asked and could not answer (loop time)."""
        self._task: Optional[asyncio.Task[None]] = None

    def subscribe(self) -> asyncio.Queue[Optional[Change]]:
        """A queue of the changes from now on (None in it: the subscriber fell behind and must
        read ``pending`` again); starts the feed if it is not running."""
        queue: asyncio.Queue[Optional[Change]] = asyncio.Queue(QUEUE_SIZE)
        self._subscribers.add(queue)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="inbox-feed")
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Optional[Change]]) -> None:
        """Stop telling ``queue``; the feed ends ``IDLE_SECONDS`` after its last subscriber left."""
        self._subscribers.discard(queue)

    async def close(self) -> None:
        """Stop following (the app is shutting down)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        idle_since: Optional[float] = None
        loop = asyncio.get_running_loop()
        while True:
            before = self.trouble
            try:
                await self.look()
                self.trouble = None
            except ConversationError as err:
                self.trouble = "The approvals cannot be read just now (Temporal is not answering); this page " \
                               "catches up when it does."
                log.warning("inbox feed: pending approvals not read (%s)", err.kind)
            except Exception as err:  # noqa: BLE001 (the feed goes on; the next look may succeed)
                self.trouble = "The approvals cannot be read just now; this page catches up when they can."
                log.warning("inbox feed: pending approvals not read (%s)", type(err).__name__)
            if self.trouble != before:
                self._tell(Change("inbox.status", None))
            self.synced.set()
            if self._subscribers:
                idle_since = None
            elif idle_since is None:
                idle_since = loop.time()
            elif loop.time() - idle_since >= IDLE_SECONDS:
                self.synced.clear()  # a later subscriber waits for a fresh look
                return
            await asyncio.sleep(FEED_SECONDS)

    async def look(self) -> None:
        """Compare what visibility lists now with ``pending`` and tell the subscribers each
        change. Raises ``ConversationError`` when visibility does not answer (nothing changes)."""
        client = await self._ensure_client()
        runs, token, pages = [], None, 0
        while pages < MAX_PAGES:
            page, token = await client.pending_approval_runs(limit=MAX_PAGE, next_page_token=token, scope=self._scope)
            runs.extend(page)
            pages += 1
            if token is None:
                break
        listed = {run.approval_id: run for run in runs}
        now = asyncio.get_running_loop().time()
        # new ones, and now and then those whose process could not be read (a stuck one, no worker)
        fresh = [run for run in runs if run.approval_id not in self.pending
                 or (self.pending[run.approval_id].item.operation is None
                     and now - self._unread.get(run.approval_id, 0.0) >= REREAD_SECONDS)]
        items = await client.approval_items([(r.approval_id, r.workflow_id, r.readable) for r in fresh])
        for run, item in zip(fresh, items):
            known = self.pending.get(run.approval_id)
            if item.operation is None:
                self._unread[run.approval_id] = now
            else:
                self._unread.pop(run.approval_id, None)
            if known is not None and item.operation is None:
                continue  # still unreadable: nothing new to show
            self.pending[run.approval_id] = InboxItem(item, run.workflow_id, run.customer)
            self._tell(Change("approval.requested", self.pending[run.approval_id]))
        for approval_id in [a for a in self.pending if a not in listed]:
            ended = await self._ended(client, self.pending[approval_id])
            if ended is not None:
                del self.pending[approval_id]
                self._unread.pop(approval_id, None)
                self._tell(ended)

    async def _ended(self, client: StatekeeperClient, known: InboxItem) -> Optional[Change]:
        """How an approval that left the list ended, or None while its process still says it
        is pending (or cannot say just now)."""
        try:
            item = await asyncio.wait_for(client.approval(known.item.approval_id), READ_SECONDS)
        except ConversationError as err:
            if err.kind != "not_found":
                return None
            # its process is gone (retention): nothing is left to decide
            item = known.item.model_copy(update={"status": ApprovalStatus.WITHDRAWN})
        except asyncio.TimeoutError:
            return None
        if item.status is ApprovalStatus.PENDING:
            return None
        return Change(TYPE_OF[item.status], InboxItem(item, known.workflow_id, known.customer))

    def _tell(self, change: Change) -> None:
        for queue in list(self._subscribers):
            try:
                queue.put_nowait(change)
            except asyncio.QueueFull:
                # fell behind: told to read ``pending`` afresh (its stream ends, the page reconnects)
                self._subscribers.discard(queue)
                queue.get_nowait()
                queue.put_nowait(None)


class Feeds:
    """``Feeds(ensure_client, tenancy)``: one ``TenantFeed`` per tenant, made on first use."""

    def __init__(self, ensure_client: Callable[[], Awaitable[StatekeeperClient]], tenancy: Any) -> None:
        self._ensure_client, self._tenancy = ensure_client, tenancy
        self._feeds: dict[str, TenantFeed] = {}

    async def close(self) -> None:
        """Stop every tenant's feed."""
        for feed in self._feeds.values():
            await feed.close()

    def of(self, tenant: str) -> TenantFeed:
        """The feed of ``tenant``'s pending approvals."""
        feed = self._feeds.get(tenant)
        if feed is None:
            feed = self._feeds[tenant] = TenantFeed(self._ensure_client, self._tenancy.list_clauses(tenant))
        return feed

