"""Erasure reaches the external email and ticketing services: erasing a customer deletes the
emails sent to them and the tickets of their conversations there; another customer's stay.

Real Temporal dev server (the erasure tests' own), worker, retail SQLite, email and ticketing
over HTTP; only the model is scripted.
"""

from __future__ import annotations

import uuid

import httpx

from tests.policy_fixtures import CUSTOMER, EMAIL
from tests.service_fixtures import services  # noqa: F401 - fixture
from tests.workflow_harness import running_worker
from tests.workflows.erasure_fixtures import (
    cancel_then_transfer,
    env,  # noqa: F401  (the module-scoped fixture)
    return_then_transfer,
    transfer_on_request,
)
from starter.runtime.worker import build_erasure


def _held(services: dict[str, str], service: str, path: str, reference: str) -> list[dict]:  # noqa: F811
    return httpx.get(f"{services[service]}{path}", params={"reference": reference}).json()


def _tickets_of(services: dict[str, str], conversation: str) -> list[str]:  # noqa: F811
    references = httpx.get(f"{services['ticketing']}/tickets/references").json()
    return [r for r in references if r.startswith(f"transfer:{conversation}:")]


async def test_erasing_a_customer_reaches_the_email_and_ticketing_services(env, settings, services):  # noqa: F811
    raj, sofia = f"erase-svc-raj-{uuid.uuid4().hex[:6]}", f"erase-svc-sofia-{uuid.uuid4().hex[:6]}"
    with_services = settings.model_copy(update={f"{n}_url": u for n, u in services.items()})
    async with running_worker(env, settings, brain=transfer_on_request, services=services) as (client, backend):
        await return_then_transfer(client, raj)
        await cancel_then_transfer(client, sofia)
        [write] = (await client.state(raj)).completed_operations
        email_ref = f"email:{write.idempotency_key}"
        assert [m["to_email"] for m in _held(services, "email", "/messages", email_ref)] == [EMAIL]
        assert len(_tickets_of(services, raj)) == 1 and len(_tickets_of(services, sofia)) == 1
        assert backend.outbox_messages("main") == [] and backend.tickets("main") == []  # nothing in retail

        report = await build_erasure(env.client, with_services, backend).erase_customer(CUSTOMER, "operator-7")

    assert (report.records.outbox_deleted, report.records.tickets_deleted) == (1, 1)
    assert _held(services, "email", "/messages", email_ref) == []
    assert _tickets_of(services, raj) == []
    assert len(_tickets_of(services, sofia)) == 1  # another customer's stays
