"""``/customers/{customer_id}/memory`` over real HTTP (uvicorn on loopback, keys in the journal's
database, a real Temporal dev server): a customer's facts with their source and age, in the
caller's tenant only; a key scoped to one customer reads only that customer's; forgetting a
fact twice is a 404 the second time and leaves the other facts; every read and change is in
the audit log by pseudonym; bad ids are refused and change nothing."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from typing import AsyncIterator

import httpx
import pytest

from activities.store.api_keys import KeyStore, Role
from activities.store.audit import AuditLog
from activities.store.memory import MemoryStore
from settings import Settings
from starter.api.auth import access_from_settings
from starter.api.server import api_beside
from tests.memory_fixtures import remember
from tests.ports import free_port
from workflows.domain.memory import FactKind
from workflows.domain.pseudonym import customer_pseudonym

RAJ, SOFIA = "raj_sanchez_2970", "sofia_rossi_8776"


@pytest.fixture(scope="module")
async def stack(temporal_env, tmp_path_factory) -> AsyncIterator[SimpleNamespace]:
    tmp = tmp_path_factory.mktemp("memory")
    settings = Settings(database_url=f"sqlite:///{tmp / 'sor.sqlite'}", data_dir=tmp, anthropic_api_key=None,
                        task_queue=f"mem-{uuid.uuid4().hex[:8]}", store_tenants={"acme-store": "acme"})
    key = settings.pseudonym_secret()
    keys = KeyStore(settings.resolved_journal_url(), settings.api_key_hmac_secret())
    made = {"svc": keys.create("default", Role.SERVICE), "op": keys.create("default", Role.OPERATOR),
            "acme": keys.create("acme", Role.SERVICE),
            "raj": keys.create("default", Role.SERVICE, customer=customer_pseudonym(RAJ, key))}
    store = MemoryStore(settings.resolved_journal_url())
    learnt = datetime.now(timezone.utc) - timedelta(days=3)
    for tenant, customer, kind, value in (("default", RAJ, FactKind.REFUND_METHOD, "gift_card_0000000"),
                                          ("default", RAJ, FactKind.PREFERRED_LANGUAGE, "Spanish"),
                                          ("default", SOFIA, FactKind.DELIVERY_INSTRUCTIONS, "ring twice"),
                                          ("acme", RAJ, FactKind.PREFERRED_LANGUAGE, "French")):
        remember(store, customer_pseudonym(customer, key), kind, value, tenant=tenant, at=learnt)
    async with api_beside(temporal_env.client, settings, host="127.0.0.1", port=free_port(),
                          access=access_from_settings(settings, "127.0.0.1")) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30.0) as http:
            yield SimpleNamespace(http=http, headers={n: {"Authorization": f"Bearer {k}"} for n, (_, k) in made.items()},
                                  audit=AuditLog(settings.resolved_journal_url()), store=store,
                                  pseudonym=lambda c: customer_pseudonym(c, key))


async def _memory(s, customer: str, who: str) -> httpx.Response:
    return await s.http.get(f"/customers/{customer}/memory", headers=s.headers[who])


async def test_a_customers_facts_with_their_source_and_age_in_the_callers_tenant_only(stack):
    response = await _memory(stack, RAJ, "svc")
    assert response.status_code == 200, response.text
    items = response.json()["items"]
    assert [(i["kind"], i["value"]) for i in items] == [("preferred_language", "Spanish"),
                                                        ("refund_method", "gift_card_0000000")]
    first = items[0]
    assert first["source"] == {"conversation_id": "c-1", "turn": 2, "words": "please remember Spanish"}
    assert first["fact_id"].startswith("mem_") and first["learnt_at"] < first["expires_at"]
    acme = (await _memory(stack, RAJ, "acme")).json()["items"]
    assert [i["value"] for i in acme] == ["French"]  # another tenant's memory of the same person
    entries = stack.audit.entries(subject=stack.pseudonym(RAJ))
    assert any(e.action == "read_memory" and e.detail == "tenant=default items=2" for e in entries)
    assert all(RAJ not in e.subject for e in stack.audit.entries())


async def test_a_customer_scoped_key_reads_only_its_customer(stack):
    assert (await _memory(stack, RAJ, "raj")).status_code == 200
    other = await _memory(stack, SOFIA, "raj")
    assert other.status_code == 404 and "ring twice" not in other.text


async def test_forgetting_a_fact_twice_and_the_rest_stays(stack):
    items = (await _memory(stack, SOFIA, "op")).json()["items"]
    assert len(items) == 1
    path = f"/customers/{SOFIA}/memory/{items[0]['fact_id']}"
    assert (await stack.http.delete(path, headers=stack.headers["raj"])).status_code == 404  # not its customer
    assert (await stack.http.delete(path, headers=stack.headers["op"])).status_code == 204
    again = await stack.http.delete(path, headers=stack.headers["op"])
    assert again.status_code == 404 and "no remembered fact" in again.json()["detail"]
    assert (await _memory(stack, SOFIA, "op")).json()["items"] == []
    assert len((await _memory(stack, RAJ, "op")).json()["items"]) == 2
    assert any(e.action == "forget_memory" for e in stack.audit.entries(subject=stack.pseudonym(SOFIA)))


@pytest.mark.parametrize("customer", ["raj sanchez", "a" * 200, "raj%00x"])
async def test_a_customer_id_the_lists_would_refuse_is_a_422_and_nothing_changes(stack, customer):
    before = (await _memory(stack, RAJ, "op")).json()
    response = await stack.http.get(f"/customers/{customer}/memory", headers=stack.headers["op"])
    assert response.status_code == 422, response.text
    assert isinstance(response.json()["detail"], str)
    assert (await _memory(stack, RAJ, "op")).json() == before


async def test_without_a_key_nothing_is_read(stack):
    response = await stack.http.get(f"/customers/{RAJ}/memory")
    assert response.status_code == 401
