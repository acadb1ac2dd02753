"""One delivery attempt (``WebhookActivities.deliver``) against a real HTTP receiver on a loopback
port (``tests.webhook_receiver``), the journal on SQLite: a 200 delivers the event's JSON with
Standard Webhooks headers that the library verifies (``webhook-id`` the event's id, the same on a
redelivery); a 500 is a retryable failure recorded with its status; a 301 is a failed attempt
and its ``Location`` is never visited; a receiver that answers after 30 s, or with a 50 MB body,
holds the attempt for at most its deadline (the body is never read); a receiver that takes one
event and refuses the next leaves the first delivered and the second pending; a loopback
receiver while loopback is not allowed is refused before any request is sent; a deleted
webhook ends its delivery with the non-retryable ``WebhookGone``; ``give_up`` marks it failed."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from standardwebhooks import Webhook
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.store.journal import JournalStore
from activities.store.webhooks import DeliveryStatus, SecretSeal, WebhookStore
from activities.webhooks.addresses import Allowance
from activities.webhooks.delivery import WebhookActivities
from activities.webhooks.starts import DeliveryStarter
from tests.journal_fixtures import sqlite_url
from tests.webhook_receiver import receiving
from workflows.domain.errors import ErrorType
from workflows.domain.journal import EventRecord, EventType, TurnRecord, event_id
from workflows.webhooks.workflow import DeliveryAttempt, RetrySchedule

DEADLINE = 2.0
"""The attempts' deadline here (``Settings.webhook_timeout_seconds``; 10 s by default)."""


@pytest.fixture
def parts(tmp_path: Path):
    url = sqlite_url(tmp_path)
    journal, hooks = JournalStore(url), WebhookStore(url, SecretSeal({"k": b"\x05" * 32}))
    yield journal, hooks
    journal.close()
    hooks.close()


def activities(hooks: WebhookStore, allow: Allowance = Allowance(loopback=True)) -> WebhookActivities:
    return WebhookActivities(hooks, DeliveryStarter(None, "unused", hooks, RetrySchedule()), allow,  # type: ignore[arg-type]
                             timeout_seconds=DEADLINE)


def subscribe(journal: JournalStore, hooks: WebhookStore, url: str, *keys: str) -> tuple[str, str, list[str]]:
    """A webhook to ``url`` and the events ``keys`` of conversation c1; returns its id, its secret
    and the events' ids."""
    made, secret = hooks.create("default", url, ["*"])
    record(journal, *keys)
    return made.webhook_id, secret, [event_id("c1", key) for key in keys]


def record(journal: JournalStore, *keys: str) -> None:
    """Store the events ``keys`` of conversation c1 (webhooks made later do not hear them)."""
    journal.record_turn(TurnRecord(conversation_id="c1", events=[
        EventRecord(key=key, type=EventType.CONVERSATION_REPLIED, at=datetime.now(timezone.utc),
                    data={"conversation_id": "c1", "turn": n}) for n, key in enumerate(keys)]))


async def attempt(acts: WebhookActivities, webhook_id: str, evt: str) -> int:
    return await ActivityEnvironment().run(acts.deliver, DeliveryAttempt(webhook_id=webhook_id, event_id=evt))


async def refused(acts: WebhookActivities, webhook_id: str, evt: str) -> ApplicationError:
    with pytest.raises(ApplicationError) as err:
        await attempt(acts, webhook_id, evt)
    return err.value


async def test_a_delivered_event_is_signed_and_a_redelivery_keeps_its_id(parts):
    journal, hooks = parts
    with receiving() as receiver:
        webhook_id, secret, (evt,) = subscribe(journal, hooks, f"{receiver.url}/ok", "reply:0:1")
        acts = activities(hooks)
        assert await attempt(acts, webhook_id, evt) == 200
        assert await attempt(acts, webhook_id, evt) == 200  # at least once: a retry sends it again
        first, again = receiver.got("/ok")
    for got in (first, again):
        event = Webhook(secret).verify(got.body, got.headers)
        assert event["id"] == evt == got.headers["webhook-id"] and event["sequence"] == 1
        assert event["type"] == "conversation.replied" and event["data"] == {"conversation_id": "c1", "turn": 0}
        assert got.headers["content-type"] == "application/json"
    delivery = hooks.delivery("default", webhook_id, evt)
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == (DeliveryStatus.DELIVERED, 2, 200)


async def test_a_500_and_a_301_are_failed_attempts_and_the_redirect_is_not_followed(parts):
    journal, hooks = parts
    with receiving() as receiver:
        server_error = hooks.create("default", f"{receiver.url}/500", ["*"])[0].webhook_id
        moved = hooks.create("default", f"{receiver.url}/301", ["*"])[0].webhook_id
        record(journal, "reply:0:1")
        evt = event_id("c1", "reply:0:1")
        acts = activities(hooks)
        err = await refused(acts, server_error, evt)
        assert err.type == ErrorType.WEBHOOK_NOT_ACCEPTED.value and not err.non_retryable and "answered 500" in str(err)
        err = await refused(acts, moved, evt)
        assert err.type == ErrorType.WEBHOOK_NOT_ACCEPTED.value and "redirects are not followed" in str(err)
        assert len(receiver.got("/301")) == 1 and receiver.got("/ok") == []
    for webhook_id, status in ((server_error, 500), (moved, 301)):
        d = hooks.delivery("default", webhook_id, evt)
        assert (d.status, d.attempts, d.last_status_code) == (DeliveryStatus.PENDING, 1, status)


@pytest.mark.parametrize("path, delivered", [("/slow", False), ("/huge", True)])
async def test_a_slow_or_huge_answer_holds_the_attempt_for_its_deadline_at_most(parts, path, delivered):
    journal, hooks = parts
    with receiving() as receiver:
        webhook_id, _, (evt,) = subscribe(journal, hooks, f"{receiver.url}{path}", "reply:0:1")
        began = time.monotonic()
        if delivered:
            assert await attempt(activities(hooks), webhook_id, evt) == 200  # the status line is enough
        else:
            err = await refused(activities(hooks), webhook_id, evt)
            assert f"no answer within {DEADLINE:g} s" in str(err)
        assert time.monotonic() - began < DEADLINE + 1.5
        assert len(receiver.got(path)) == 1
    d = hooks.delivery("default", webhook_id, evt)
    assert d.status is (DeliveryStatus.DELIVERED if delivered else DeliveryStatus.PENDING)
    assert d.last_status_code == (200 if delivered else None)


async def test_a_receiver_that_takes_one_event_and_refuses_the_next(parts):
    journal, hooks = parts
    with receiving() as receiver:
        webhook_id, secret, (one, two) = subscribe(journal, hooks, f"{receiver.url}/flip", "reply:0:1", "reply:0:2")
        acts = activities(hooks)
        assert await attempt(acts, webhook_id, one) == 200
        err = await refused(acts, webhook_id, two)
        assert "answered 500" in str(err)
        assert [Webhook(secret).verify(r.body, r.headers)["id"] for r in receiver.got("/flip")] == [one, two]
    assert hooks.delivery("default", webhook_id, one).status is DeliveryStatus.DELIVERED
    second = hooks.delivery("default", webhook_id, two)
    assert (second.status, second.last_status_code) == (DeliveryStatus.PENDING, 500)


async def test_a_refused_address_sends_nothing_and_a_deleted_webhook_ends_its_delivery(parts):
    journal, hooks = parts
    with receiving() as receiver:
        webhook_id, _, (evt,) = subscribe(journal, hooks, f"{receiver.url}/ok", "reply:0:1")
        err = await refused(activities(hooks, Allowance()), webhook_id, evt)
        assert "loopback address" in str(err) and not err.non_retryable
        assert receiver.got("/ok") == []
        d = hooks.delivery("default", webhook_id, evt)
        assert (d.attempts, d.last_status_code) == (1, None) and "loopback" in d.last_error

        await ActivityEnvironment().run(activities(hooks).give_up, DeliveryAttempt(webhook_id=webhook_id, event_id=evt))
        assert hooks.delivery("default", webhook_id, evt).status is DeliveryStatus.FAILED

        hooks.delete("default", webhook_id)
        err = await refused(activities(hooks), webhook_id, evt)
        assert err.type == ErrorType.WEBHOOK_GONE.value and err.non_retryable
        assert receiver.got("/ok") == []
