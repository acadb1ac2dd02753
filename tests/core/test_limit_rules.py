"""The pure rules of the limits per key and per tenant: a tenant's limits from the settings
(its own entry, field by field over the defaults), when a tenant's daily budget is spent, which
callers a request rate applies to and at what rate, the Retry-After of a 429 (whole seconds,
never 0), and the fairness key a run gets from its tenant."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError
from temporalio.common import Priority, SearchAttributePair

from activities.store.api_keys import Role
from settings import Settings, TenantLimits
from starter.api.auth import LOCAL_ACTOR, Principal
from starter.api.guard import refusal_headers
from starter.api.limits import ApiLimits, RateLimited
from starter.client.errors import ConversationError, status_for
from starter.client.tenancy import tenant_priority
from workflows.domain.contracts import TenantAllowance
from workflows.options import CUSTOMER_ID, TENANT


def test_a_tenants_limits_take_its_own_fields_over_the_defaults():
    s = Settings(tenant_open_conversations=50, tenant_daily_tokens=1_000_000,
                 tenant_limits={"acme": TenantLimits(open_conversations=5),
                                "free": TenantLimits(open_conversations=None, daily_tokens=10)})
    assert s.limits_of("acme") == TenantLimits(open_conversations=5, daily_tokens=1_000_000)
    assert s.limits_of("free") == TenantLimits(open_conversations=None, daily_tokens=10)  # null: no limit
    assert s.limits_of("other") == TenantLimits(open_conversations=50, daily_tokens=1_000_000)


def test_limits_are_off_by_default_but_the_request_rate():
    s = Settings()
    assert s.limits_of("default") == TenantLimits() and s.api_requests_per_minute == 600


@pytest.mark.parametrize("bad", [{"open_conversations": 0}, {"daily_tokens": -1}, {"tokens": 5}])
def test_a_bad_tenant_limit_is_a_settings_error(bad):
    with pytest.raises(ValidationError):
        Settings(tenant_limits={"acme": bad})


def test_the_daily_budget_is_spent_at_the_cap_counting_the_turns_own_calls():
    assert not TenantAllowance(tenant="t", used_today=10**9).spent(10**9)  # no cap
    capped = TenantAllowance(tenant="t", daily_tokens=1000, used_today=900)
    assert not capped.spent() and not capped.spent(99)
    assert capped.spent(100) and TenantAllowance(tenant="t", daily_tokens=1000, used_today=1000).spent()


class FakeRates:
    def __init__(self, wait):
        self.wait, self.asked = wait, []

    def admit(self, key_id, per_minute):
        self.asked.append((key_id, per_minute))
        return self.wait


def _limits(wait=None) -> ApiLimits:
    limits = ApiLimits.__new__(ApiLimits)
    limits.rates, limits.requests_per_minute = FakeRates(wait), 600
    limits.limits_of = Settings().limits_of
    return limits


def test_a_keys_own_rate_wins_and_the_keyless_local_operator_is_not_limited():
    limits = _limits()
    own = Principal(actor="key:0123456789ab", tenant="t", role=Role.SERVICE, requests_per_minute=30)
    default = Principal(actor="key:ba9876543210", tenant="t", role=Role.SERVICE)
    local = Principal(actor=LOCAL_ACTOR, tenant="t", role=Role.OPERATOR)
    assert (limits.rate_of(own), limits.rate_of(default), limits.rate_of(local)) == (30, 600, None)
    asyncio.run(limits.admit(own))
    asyncio.run(limits.admit(local))
    assert limits.rates.asked == [("0123456789ab", 30)]


@pytest.mark.parametrize("wait, header", [(0.001, "1"), (1.0, "1"), (1.2, "2"), (59.5, "60")])
def test_past_its_rate_a_key_gets_a_429_with_whole_seconds_to_wait(wait, header):
    limits = _limits(wait)
    with pytest.raises(RateLimited) as refused:
        asyncio.run(limits.admit(Principal(actor="key:0123456789ab", tenant="t", role=Role.SERVICE)))
    err = refused.value
    assert status_for(err) == 429 and refusal_headers(err) == {"Retry-After": header}
    assert str(err) == f"too many requests: this API key may send 600 a minute; retry in {header} s"


def test_other_refusals_keep_their_headers():
    assert refusal_headers(ConversationError("no key", "unauthenticated")) == {"WWW-Authenticate": "Bearer"}
    assert refusal_headers(ConversationError("open limit", "rate_limited")) is None  # no time to name
    assert status_for(ConversationError("open limit", "rate_limited")) == 429


def test_a_run_of_a_tenant_carries_it_as_its_fairness_key():
    assert tenant_priority([SearchAttributePair(TENANT, "acme"), SearchAttributePair(CUSTOMER_ID, "cust-1")]) \
        == Priority(fairness_key="acme")
    assert tenant_priority([]) == Priority.default  # CLI and τ-bench runs: the default key
