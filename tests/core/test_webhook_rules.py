"""The webhooks' pure rules: which URLs and addresses a webhook may use (the SSRF guard's
shape and address checks, ``activities.webhooks.addresses``), the event types a subscription
may name, the signed request's shape (body = the event's JSON, Standard Webhooks headers that
the specification's own library verifies, ``webhook-id`` the event's id on every attempt),
the secret's form and its seal (AES-GCM, bound to its webhook), and the delivery workflows'
retry policy and ids."""

from __future__ import annotations

import ipaddress
import json
from datetime import datetime, timedelta, timezone

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from activities.store.webhooks import SecretSeal, Target, matches, new_secret
from activities.webhooks.addresses import Allowance, Refused, address_problem, check_shape, resolve
from activities.webhooks.delivery import body_of, signed_headers
from starter.client.errors import ConversationError
from starter.client.webhooks.service import check_events
from workflows.domain.errors import ErrorType
from workflows.webhooks.workflow import RetrySchedule, delivery_retry, delivery_workflow_id

NONE, LOOPBACK, PRIVATE = Allowance(), Allowance(loopback=True), Allowance(private=True)


@pytest.mark.parametrize("address, problem", [
    ("127.0.0.1", "a loopback address"), ("127.9.9.9", "a loopback address"), ("::1", "a loopback address"),
    ("10.1.2.3", "a private address"), ("172.16.0.1", "a private address"), ("192.168.1.1", "a private address"),
    ("100.64.0.1", "a private address"), ("fd00::1", "a private address"),
    ("169.254.169.254", "a link-local address"), ("fe80::1", "a link-local address"),
    ("0.0.0.0", "an unspecified address"), ("::", "an unspecified address"),
    ("224.0.0.1", "a multicast address"), ("ff02::1", "a multicast address"),
    ("240.0.0.1", "a reserved address"), ("::ffff:10.0.0.1", "a private address"),
    ("::ffff:127.0.0.1", "a loopback address"), ("8.8.8.8", None), ("2606:4700:4700::1111", None),
])
def test_addresses_the_public_internet_cannot_reach_are_refused(address, problem):
    assert address_problem(ipaddress.ip_address(address), NONE) == problem


def test_the_settings_open_loopback_or_private_addresses_and_nothing_else():
    ip = ipaddress.ip_address
    assert address_problem(ip("127.0.0.1"), LOOPBACK) is None
    assert address_problem(ip("10.0.0.1"), LOOPBACK) == "a private address"
    assert address_problem(ip("10.0.0.1"), PRIVATE) is None
    assert address_problem(ip("127.0.0.1"), PRIVATE) == "a loopback address"
    both = Allowance(loopback=True, private=True)
    for never in ("169.254.169.254", "0.0.0.0", "224.0.0.1", "240.0.0.1", "fe80::1"):
        assert address_problem(ip(never), both) is not None, never


@pytest.mark.parametrize("url, words", [
    ("ftp://example.com/hook", "must start with http:// or https://"),
    ("file:///etc/passwd", "must start with http:// or https://"),
    ("javascript:alert(1)", "must start with http:// or https://"),
    ("example.com/hook", "must start with http:// or https://"),
    ("https://", "names no host"),
    ("https://user:pw@example.com/hook", "user name or password"),
    ("https://example.com/a b", "spaces or control characters"),
    ("https://example.com/\x1b[2J", "spaces or control characters"),
    ("https://example.com:99999/", "not a valid URL"),
    ("https://example.com/" + "a" * 2030, "at most 2048 characters (this one has 2050)"),
])
def test_a_url_of_the_wrong_form_is_refused_with_its_reason(url, words):
    with pytest.raises(Refused, match=words.replace("(", r"\(").replace(")", r"\)")):
        check_shape(url)


def test_a_url_of_exactly_2048_characters_is_taken():
    url = "https://example.com/" + "a" * (2048 - len("https://example.com/"))
    assert check_shape(url) == ("https", "example.com", 443)
    assert check_shape("HTTP://Example.com:8080/x") == ("http", "example.com", 8080)


async def test_literal_addresses_are_judged_without_a_lookup():
    assert (await resolve("http://127.0.0.1:9/x", LOOPBACK)).address == ipaddress.ip_address("127.0.0.1")
    assert (await resolve("https://[2606:4700:4700::1111]/x", NONE)).port == 443
    with pytest.raises(Refused, match="loopback address.*STATEKEEPER_WEBHOOK_ALLOW_LOOPBACK"):
        await resolve("http://127.0.0.1:9/x", NONE)
    with pytest.raises(Refused, match="private address.*STATEKEEPER_WEBHOOK_ALLOW_PRIVATE"):
        await resolve("http://10.0.0.5/x", LOOPBACK)
    with pytest.raises(Refused, match="link-local"):
        await resolve("http://169.254.169.254/latest/meta-data", Allowance(loopback=True, private=True))


def test_event_types_are_the_event_models_or_all():
    assert check_events(["approval.requested", "approval.requested", "conversation.ended"]) == [
        "approval.requested", "conversation.ended"]
    assert check_events(["*"]) == ["*"]
    with pytest.raises(ConversationError, match="unknown event type") as err:
        check_events(["approval.requested", "approval.granted"])
    assert err.value.kind == "invalid"
    with pytest.raises(ConversationError, match="at least one"):
        check_events([])
    assert matches(["*"], "operation.applied") and matches(["operation.applied"], "operation.applied")
    assert not matches(["operation.refused"], "operation.applied")


def _target(secret: str) -> Target:
    return Target(url="https://example.com/hook", secret=secret, event_id="evt_0123456789abcdef01234567",
                  event_type="approval.requested", at=datetime(2026, 12, 6, 5, 13, 59, 718783, tzinfo=timezone.utc),
                  sequence=5, data={"conversation_id": "desk-44", "amount": "826.70"})


def test_a_delivery_is_the_events_json_signed_per_standard_webhooks():
    secret = new_secret()
    assert secret.startswith("whsec_") and len(Webhook(secret)._whsecret) == 24  # noqa: SLF001 (192 bits)
    body = body_of(_target(secret))
    assert json.loads(body) == {"id": "evt_0123456789abcdef01234567", "type": "approval.requested",
                                "timestamp": "2026-12-06T05:13:59.718783Z", "sequence": 5,
                                "data": {"amount": "826.70", "conversation_id": "desk-44"}}
    headers = signed_headers(secret, "evt_0123456789abcdef01234567", body)
    assert set(headers) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert headers["webhook-id"] == "evt_0123456789abcdef01234567"
    assert headers["webhook-signature"].startswith("v1,")
    assert Webhook(secret).verify(body, headers)["sequence"] == 5
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body, headers)  # another subscription's secret
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body.replace(b"826.70", b"926.70"), headers)  # a changed body
    later = signed_headers(secret, "evt_0123456789abcdef01234567", body,
                           now=datetime.now(timezone.utc) + timedelta(minutes=1))
    assert later["webhook-id"] == headers["webhook-id"]  # a redelivery keeps its id, signs its own time


def test_a_sealed_secret_opens_only_for_its_own_webhook_and_keys():
    keys = {"k1": b"\x01" * 32, "k2": b"\x02" * 32}
    seal, secret = SecretSeal(keys, "k2"), new_secret()
    stored = seal.seal("wh_a", secret)
    assert stored.startswith("aesgcm:k2:") and secret not in stored
    assert seal.open("wh_a", stored) == secret
    assert SecretSeal(keys, "k1").open("wh_a", stored) == secret  # a rotated-out key still opens
    with pytest.raises(ValueError):
        seal.open("wh_b", stored)  # moved to another row
    with pytest.raises(ValueError):
        SecretSeal({"k1": b"\x01" * 32}).open("wh_a", stored)  # its key is gone
    assert SecretSeal(None).seal("wh_a", secret) == f"plain:{secret}"


def test_the_retry_policy_spans_more_than_a_day_and_never_retries_a_deleted_webhook():
    schedule = RetrySchedule()
    policy = delivery_retry(schedule)
    assert policy.initial_interval == timedelta(seconds=5) and policy.backoff_coefficient == 2.0
    assert policy.maximum_interval == timedelta(hours=1) and policy.maximum_attempts == 0
    assert policy.non_retryable_error_types == [ErrorType.WEBHOOK_GONE.value]
    assert schedule.give_up_seconds >= 24 * 3600
    waits, total = [], 0.0
    while total < schedule.give_up_seconds:  # the attempts' start times under this policy
        wait = min(schedule.initial_seconds * 2 ** len(waits), schedule.maximum_interval_seconds)
        waits.append(wait)
        total += wait
    assert len(waits) >= 30, "a receiver down for a day is tried at least hourly throughout"
    assert delivery_workflow_id("wh_1", "evt_2") == "webhook-delivery:wh_1:evt_2"
