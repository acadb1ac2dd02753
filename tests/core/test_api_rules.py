"""The HTTP API's rules as pure code: the role matrix (which kind of caller may do what), the key
header forms, loopback binds, tenancy's store map and list clauses (including that a tenant name
can never change a visibility query), and the refusal statuses (each ``ConversationError`` kind
maps to one status code, 422, 409, 404, 503 or 504, whatever the reason text says).

The API itself, over HTTP against a real server and worker, is tests/e2e/test_api.py; its
access rules over HTTP are tests/e2e/test_api_auth.py.
"""

from __future__ import annotations

import pytest
from starlette.requests import Request

from activities.store.api_keys import KEY_PATTERN, Role, check_tenant
from starter.api.auth import MATRIX, Permission, Principal, is_loopback, presented_key
from starter.client.errors import ConversationError, status_for
from starter.client.tenancy import Tenancy, start_attributes
from workflows.options import CUSTOMER_ID, TENANT


# --- Access: roles, keys, loopback, tenancy ---

P = Permission
# Written out from the roles table of docs/api.md, not derived from MATRIX: a change to either shows here.
EXPECTED = {
    #                          customer-scoped, service, operator
    P.START_CONVERSATION:     (True, True, True),
    P.SEND_MESSAGE:           (True, True, True),
    P.READ_CONVERSATION:      (True, True, True),
    P.LIST_CONVERSATIONS:     (True, True, True),
    P.CANCEL_CONVERSATION:    (False, False, True),
    P.REQUEST_REFUND:         (False, True, True),
    P.READ_REFUNDS:           (False, True, True),
    P.LIST_APPROVALS:         (False, False, True),
    P.DECIDE_APPROVAL:        (False, False, True),
    P.RESOLVE_OUTCOME:        (False, False, True),
    P.CUSTOMER_MEMORY:        (True, True, True),
    P.MANAGE_WEBHOOKS:        (False, False, True),
}
CALLERS = (Principal(actor="key:a", tenant="t", role=Role.SERVICE, customer="cust-1"),
           Principal(actor="key:b", tenant="t", role=Role.SERVICE),
           Principal(actor="key:c", tenant="t", role=Role.OPERATOR))


def test_the_role_matrix_is_the_documented_one():
    assert set(EXPECTED) == set(Permission)
    for permission, allowed in EXPECTED.items():
        assert tuple(caller.may(permission) for caller in CALLERS) == allowed, permission
    assert set(MATRIX) == {"customer", "service", "operator"}


def test_a_refusal_is_a_403_naming_the_key_it_needs():
    customer, service, operator = CALLERS
    with pytest.raises(ConversationError) as err:
        service.require(P.DECIDE_APPROVAL)
    assert status_for(err.value) == 403 and "needs an operator key" in str(err.value)
    with pytest.raises(ConversationError) as err:
        customer.require(P.REQUEST_REFUND)
    assert status_for(err.value) == 403 and "needs a tenant-wide key" in str(err.value)
    operator.require(P.DECIDE_APPROVAL)  # no refusal


def _request(headers: dict[str, str]) -> Request:
    return Request({"type": "http", "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]})


def test_the_key_is_read_from_bearer_or_x_api_key():
    assert presented_key(_request({"Authorization": "Bearer sk_x"})) == "sk_x"
    assert presented_key(_request({"Authorization": "bearer   sk_y "})) == "sk_y"
    assert presented_key(_request({"X-API-Key": "sk_z"})) == "sk_z"
    assert presented_key(_request({"Authorization": "Bearer sk_b", "X-API-Key": "sk_h"})) == "sk_b"
    for headers in ({}, {"Authorization": "Basic dTpw"}, {"Authorization": "Bearer "}, {"X-API-Key": ""}):
        assert presented_key(_request(headers)) is None, headers


def test_key_text_shape():
    assert KEY_PATTERN.fullmatch("sk_0123456789ab_" + "A" * 40 + "-_9")
    for bad in ("sk_0123456789AB_" + "A" * 43, "sk_0123456789ab_" + "A" * 42, "sk_0123456789ab_" + "A" * 42 + "=",
                "0123456789ab_" + "A" * 43, "sk_0123456789ab_" + "A" * 43 + "\n"):
        assert not KEY_PATTERN.fullmatch(bad), bad


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.8.9.1", True), ("::1", True),
                                            ("[::1]", True), ("localhost", True), ("0.0.0.0", False),
                                            ("::", False), ("10.0.0.1", False), ("example.com", False),
                                            ("", False), (None, False)])
def test_loopback_binds(host, loopback):
    assert is_loopback(host) is loopback


def test_tenant_names():
    assert check_tenant("acme-eu.1") == "acme-eu.1"
    for bad in ("", "Acme", "a b", 'a"b', "-a", "a" * 65, "ａ"):
        with pytest.raises(ValueError):
            check_tenant(bad)


def test_stores_belong_to_their_listed_tenant_else_the_default():
    tenancy = Tenancy(default_tenant="default", store_tenants={"acme-store": "acme"})
    assert tenancy.tenant_of_store("acme-store") == "acme"
    assert tenancy.tenant_of_store("main") == tenancy.tenant_of_store("anything") == "default"


def test_list_clauses_select_the_tenant_and_the_customer():
    tenancy = Tenancy()
    assert tenancy.list_clauses("acme") == ['`Tenant` = "acme"']
    # runs started without a Tenant (CLI, τ-bench, a version without tenancy) are the default tenant's
    assert tenancy.list_clauses("default") == ['(`Tenant` = "default" OR `Tenant` IS NULL)']
    assert tenancy.list_clauses("acme", "cust-0a1b") == ['`Tenant` = "acme"', '`CustomerId` = "cust-0a1b"']
    for hostile in ('acme" OR Tenant = "other', "a b", "x)"):
        with pytest.raises(ConversationError) as err:
            tenancy.list_clauses(hostile)
        assert err.value.kind == "invalid"


def test_start_attributes():
    assert [(p.key, p.value) for p in start_attributes("acme")] == [(TENANT, "acme")]
    assert [(p.key, p.value) for p in start_attributes("acme", "cust-1")] == [(TENANT, "acme"), (CUSTOMER_ID, "cust-1")]


# --- Refusal statuses ---

@pytest.mark.parametrize(
    ("kind", "expected"),
    [("invalid_message", 422), ("invalid", 422), ("finished", 409), ("conflict", 409), ("approval_refused", 409),
     ("not_found", 404), ("no_worker", 503), ("unavailable", 503), ("timeout", 504), ("surprise", 503)],
)
def test_status_for_kind(kind: str, expected: int) -> None:
    assert status_for(ConversationError("any reason text: does not exist", kind)) == expected


def test_free_text_goes_on_as_its_visible_text_and_a_step_id_as_sent():
    from starter.api.models import CancelIn
    from starter.api.operators import ResolutionIn

    assert CancelIn(reason="no\u200b longer\u00a0needed\U000e0041").reason == "no longer needed"
    body = ResolutionIn(step_id="s\u200b1", outcome="applied", operator="op-1", note="checked\ufeff")
    assert body.step_id == "s\u200b1" and body.note == "checked"  # an id is another id, never rewritten
