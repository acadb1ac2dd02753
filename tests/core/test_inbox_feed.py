"""The inbox's feed of a tenant's approval changes (``starter.api.inbox.feed``) over a stand-in for
the far side, Temporal (visibility's list of pending approvals and the processes' answers):

- an approval that appears is told once as ``approval.requested``, with its customer's pseudonym,
  to every subscriber;
- one that leaves the list is read again and told as ``approval.decided``/``expired``/``withdrawn``;
  one that left the list but whose process still says pending (visibility lags) stays, and is
  told once its process says how it ended; one whose process is gone is withdrawn;
- a process that cannot be read is listed with its ids and asked again only after
  ``REREAD_SECONDS``, not at every look;
- a list that fails sets the words of ``trouble`` and tells ``inbox.status``; the next good look
  clears it and tells it again; nothing pending is lost meanwhile;
- the time left before expiry as the page words it.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from starter.api.inbox import feed as feed_module
from starter.api.inbox import words
from starter.api.inbox.feed import TenantFeed
from starter.client.approvals import ApprovalItem, ApprovalOperation
from starter.client.errors import ConversationError
from starter.client.listing import PendingRun
from workflows.domain.policy.approvals import ApprovalStatus

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=timezone.utc)
SCOPE = ['`Tenant` = "t1"']


def _item(approval_id: str, status: ApprovalStatus = ApprovalStatus.PENDING, readable: bool = True,
          by: str | None = None) -> ApprovalItem:
    operation = ApprovalOperation(tool="cancel_pending_order", order_id="#W1", detail="Cancel order #W1.",
                                  amount=Decimal("826.70")) if readable else None
    return ApprovalItem(approval_id=approval_id, process="conversation", process_id=approval_id.split("~")[0][8:],
                        status=status, operation=operation, reason="826.70 is above the approval threshold of 500.00.",
                        requested_at=NOW, expires_at=NOW + timedelta(days=1), decided_by=by,
                        decided_at=NOW if by else None)


class FarSide:
    """Temporal as the feed sees it: ``listed`` (approval id → readable), each process's answer
    (``items``), ``fail`` to make the list fail; counts the reads of each approval."""

    def __init__(self) -> None:
        self.listed: dict[str, bool] = {}
        self.items: dict[str, ApprovalItem] = {}
        self.fail = False
        self.reads: dict[str, int] = {}

    async def pending_approval_runs(self, *, limit, next_page_token, scope):  # noqa: ANN001, ANN201
        assert scope == SCOPE
        if self.fail:
            raise ConversationError("Temporal is not reachable", "unavailable")
        return [PendingRun(a, a.split("~")[0], ok, f"cust-{a[-2:]}") for a, ok in self.listed.items()], None

    async def approval_items(self, pending):  # noqa: ANN001, ANN201
        out = []
        for approval_id, _, _readable in pending:
            self.reads[approval_id] = self.reads.get(approval_id, 0) + 1
            item = self.items[approval_id]
            out.append(item if item.operation is not None else ApprovalItem(
                approval_id=approval_id, process=item.process, process_id=item.process_id))
        return out

    async def approval(self, approval_id: str) -> ApprovalItem:
        self.reads[approval_id] = self.reads.get(approval_id, 0) + 1
        if approval_id not in self.items:
            raise ConversationError("gone", "not_found")
        return self.items[approval_id]


@pytest.fixture
def far() -> FarSide:
    return FarSide()


@pytest.fixture
def feed(far: FarSide) -> TenantFeed:
    async def client() -> FarSide:
        return far

    return TenantFeed(client, SCOPE)


def _drain(queue: asyncio.Queue) -> list[tuple[str, str | None, str | None]]:
    told = []
    while not queue.empty():
        change = queue.get_nowait()
        told.append((change.type, change.approval.item.approval_id if change.approval else None,
                     change.approval.item.status.value if change.approval else None))
    return told


async def test_an_approval_is_told_when_it_appears_and_again_when_it_ends(far: FarSide, feed: TenantFeed):
    a, b = "support-c1~000000000001", "support-c2~000000000002"
    first, second = asyncio.Queue(), asyncio.Queue()
    feed._subscribers.update({first, second})  # noqa: SLF001 (subscribed without starting the loop)
    far.listed, far.items = {a: True, b: True}, {a: _item(a), b: _item(b)}
    await feed.look()
    assert _drain(first) == _drain(second) == [("approval.requested", a, "pending"), ("approval.requested", b, "pending")]
    assert feed.pending[a].customer == "cust-01"
    await feed.look()
    assert _drain(first) == [] and far.reads == {a: 1, b: 1}  # nothing new: nothing told, nothing read

    # a left the list and its process says approved; b left the list but still says pending
    far.listed = {}
    far.items[a] = _item(a, ApprovalStatus.APPROVED, by="sup-ana")
    await feed.look()
    assert _drain(first) == [("approval.decided", a, "approved")]
    assert list(feed.pending) == [b]
    far.items[b] = _item(b, ApprovalStatus.EXPIRED)
    await feed.look()
    assert _drain(first) == [("approval.expired", b, "expired")] and feed.pending == {}


async def test_a_process_that_is_gone_is_withdrawn_and_an_unreadable_one_is_asked_again_later(
        far: FarSide, feed: TenantFeed, monkeypatch):
    gone, stuck = "support-c3~000000000003", "support-c4~000000000004"
    queue = asyncio.Queue()
    feed._subscribers.add(queue)  # noqa: SLF001
    far.listed, far.items = {gone: True, stuck: False}, {gone: _item(gone), stuck: _item(stuck, readable=False)}
    await feed.look()
    assert _drain(queue) == [("approval.requested", gone, "pending"), ("approval.requested", stuck, "pending")]
    assert feed.pending[stuck].item.operation is None
    for _ in range(3):
        await feed.look()
    assert far.reads[stuck] == 1  # not asked again at every look
    monkeypatch.setattr(feed_module, "REREAD_SECONDS", 0.0)
    far.items[stuck] = _item(stuck)
    await feed.look()
    assert _drain(queue) == [("approval.requested", stuck, "pending")]  # readable now: told with its fields
    assert feed.pending[stuck].item.operation is not None

    del far.listed[gone], far.items[gone]
    await feed.look()
    assert _drain(queue) == [("approval.withdrawn", gone, "withdrawn")]


async def test_a_failing_list_is_told_as_trouble_and_loses_nothing(far: FarSide, feed: TenantFeed, monkeypatch):
    monkeypatch.setattr(feed_module, "FEED_SECONDS", 0.01)
    a = "support-c5~000000000005"
    far.listed, far.items = {a: True}, {a: _item(a)}
    queue = feed.subscribe()
    try:
        await asyncio.wait_for(feed.synced.wait(), 5)
        assert _drain(queue) == [("approval.requested", a, "pending")] and feed.trouble is None
        far.fail = True
        change = await asyncio.wait_for(queue.get(), 5)
        assert change.type == "inbox.status" and change.approval is None
        assert feed.trouble == ("The approvals cannot be read just now (Temporal is not answering); this page catches "
                                "up when it does.")
        assert list(feed.pending) == [a]
        far.fail = False
        change = await asyncio.wait_for(queue.get(), 5)
        assert change.type == "inbox.status" and feed.trouble is None and list(feed.pending) == [a]
    finally:
        feed.unsubscribe(queue)
        await feed.close()


@pytest.mark.parametrize("seconds, said", [(0, "expiring now"), (-5, "expiring now"), (9, "9 s left"),
                                           (250, "4 min 10 s left"), (86399, "23 h 59 min left"),
                                           (3 * 86400 + 7200, "3 d 2 h left")])
def test_time_left_is_worded_for_a_person(seconds: int, said: str):
    assert words.time_left(NOW + timedelta(seconds=seconds), NOW) == said
    assert words.time_left(None, NOW) == "unknown"
