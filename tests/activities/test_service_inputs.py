"""What the simulated services accept, over real HTTP (payments, email, ticketing on SQLite
files, which would store a NUL as-is): a NUL character or an unpaired surrogate in any text
field, an empty money
operation and an oversized body (declared or streamed) are refused with 422 / 413 and a
clear ``detail``, and nothing is stored; valid requests still go through.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import httpx
import pytest

from systems.fleet import sqlite_databases
from systems.service_kit.limits import MAX_BODY_BYTES
from tests.service_fixtures import running_services

_fresh = itertools.count()


@pytest.fixture(scope="module")
def services(tmp_path_factory) -> dict[str, str]:
    """The three services, once for the module (each test uses references of its own)."""
    with running_services(sqlite_databases(Path(tmp_path_factory.mktemp("inputs")))) as urls:
        yield urls


@pytest.fixture
def valid() -> dict[str, tuple[str, dict]]:
    """``VALID`` with references no other test uses."""
    n = next(_fresh)
    return {system: (path, {**body, "reference": f"{body['reference']}-{n}"}) for system, (path, body) in VALID.items()}

MOVE = {"reference": "#W1", "kind": "cancel_pending_order",
        "movements": [{"transaction_type": "refund", "amount": "5.00", "payment_method_id": "credit_card_1"}]}
VALID = {
    "payments": ("/operations", MOVE),
    "email": ("/messages", {"reference": "email:k", "to_email": "a@example.com", "subject": "s", "body": "b"}),
    "ticketing": ("/tickets", {"reference": "escalate:k", "user_id": "user_1", "summary": "s"}),
}
TEXT_FIELDS = [("payments", "reference"), ("payments", "kind"), ("payments", "payment_method_id"),
               ("email", "reference"), ("email", "to_email"), ("email", "subject"), ("email", "body"),
               ("ticketing", "reference"), ("ticketing", "user_id"), ("ticketing", "summary")]


def _headers(body: dict) -> dict[str, str]:
    return {"Idempotency-Key": f"pay:{body['reference']}"}


def _stored(urls: dict[str, str], system: str, reference: str | None = None) -> int:
    """How many records the service holds for ``reference`` (None: any reference; payments
    only by reference), by its own search."""
    path = VALID[system][0]
    wanted = [reference] if reference else httpx.get(f"{urls[system]}{path}/references").json()
    return sum(len(httpx.get(f"{urls[system]}{path}", params={"reference": r}).json()) for r in wanted)


def _with_nul(body: dict, field: str) -> dict:
    if field == "payment_method_id":
        return {**body, "movements": [{**body["movements"][0], field: "credit\x00card"}]}
    return {**body, field: f"a\x00{body[field]}"}


@pytest.mark.parametrize("system,field", TEXT_FIELDS)
def test_a_nul_character_is_refused_and_nothing_is_stored(services, valid, system, field):
    path, body = valid[system]
    before = _stored(services, system) if system != "payments" else 0
    answer = httpx.post(f"{services[system]}{path}", json=_with_nul(body, field), headers=_headers(body))
    assert answer.status_code == 422, answer.text
    [error] = answer.json()["detail"]
    assert error["loc"][-1] == field and "must not contain NUL characters" in error["msg"]
    assert _stored(services, system, body["reference"]) == 0
    if system != "payments":
        assert _stored(services, system) == before  # not under the NUL reference either
    assert httpx.post(f"{services[system]}{path}", json=body, headers=_headers(body)).status_code == 201
    assert _stored(services, system, body["reference"]) == 1


@pytest.mark.parametrize("system", sorted(VALID))
def test_a_nul_in_a_search_or_an_erasure_is_refused(services, system):
    path = VALID[system][0]
    assert httpx.get(f"{services[system]}{path}", params={"reference": "a\x00b"}).status_code == 422
    if system != "payments":
        owners = "to_emails" if system == "email" else "user_ids"
        answer = httpx.post(f"{services[system]}{path}/erase", json={"references": [], owners: ["x\x00"]})
        assert answer.status_code == 422 and "NUL" in answer.text


def test_a_money_operation_without_movements_is_refused(services, valid):
    body = {**valid["payments"][1], "movements": []}
    answer = httpx.post(f"{services['payments']}/operations", json=body, headers=_headers(body))
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"][-1] == "movements"
    assert _stored(services, "payments", body["reference"]) == 0
    assert httpx.get(f"{services['payments']}/operations/pay:{body['reference']}").status_code == 404  # key free


@pytest.mark.parametrize("system,framing", [("payments", "declared"), ("email", "streamed"), ("ticketing", "declared")])
def test_a_body_over_the_limit_is_refused_before_it_is_read_whole(services, valid, system, framing):
    path, body = valid[system]
    big = b'{"reference": "' + b"x" * (MAX_BODY_BYTES + 10) + b'"}'
    content = big if framing == "declared" else iter([big[i:i + 65536] for i in range(0, len(big), 65536)])
    before = _stored(services, system) if system != "payments" else 0
    answer = httpx.post(f"{services[system]}{path}", content=content,
                        headers={**_headers(body), "Content-Type": "application/json"})
    assert answer.status_code == 413
    assert answer.json()["detail"] == f"the request body is over the limit of {MAX_BODY_BYTES} bytes; nothing was done"
    if system != "payments":
        assert _stored(services, system) == before
    assert httpx.post(f"{services[system]}{path}", json=body, headers=_headers(body)).status_code == 201


def _raw_with_surrogate(body: dict, field: str) -> bytes:
    """``body`` as JSON text with an unpaired surrogate escaped into ``field`` (valid JSON,
    which httpx's own encoder would refuse to produce)."""
    import json  # noqa: PLC0415

    marked = _with_nul(body, field)  # the NUL marks the spot; JSON escapes it as \u0000
    return json.dumps(marked).replace("\\u0000", "\\ud800").encode()


@pytest.mark.parametrize("system,field", TEXT_FIELDS)
def test_an_unpaired_surrogate_is_refused_and_nothing_is_stored(services, valid, system, field):
    path, body = valid[system]
    answer = httpx.post(f"{services[system]}{path}", content=_raw_with_surrogate(body, field),
                        headers={**_headers(body), "Content-Type": "application/json"})
    assert answer.status_code == 422, answer.text
    [error] = answer.json()["detail"]
    assert error["loc"][-1] == field and "unicode string" in error["msg"]  # pydantic's words or ours
    assert "input" not in error  # the refused text, which the answer could not encode (a 500)
    assert _stored(services, system, body["reference"]) == 0
    assert httpx.post(f"{services[system]}{path}", json=body, headers=_headers(body)).status_code == 201


@pytest.mark.parametrize("system", sorted(VALID))
def test_concurrent_writers_on_sqlite_all_succeed(services, valid, system):
    """A service's write reads (by key or reference) and then inserts: on SQLite a deferred
    transaction upgrading its lock under concurrency would fail at once with "database is
    locked" (a 500); writers take the lock up front and wait their turn."""
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    path, body = valid[system]
    bodies = [{**body, "reference": f"{body['reference']}-w{i}"} for i in range(24)]
    with httpx.Client(timeout=60) as http, ThreadPoolExecutor(12) as pool:
        codes = list(pool.map(lambda b: http.post(f"{services[system]}{path}", json=b, headers=_headers(b))
                              .status_code, bodies))
    assert codes == [201] * len(bodies)
    assert all(_stored(services, system, b["reference"]) == 1 for b in bodies)


@pytest.mark.parametrize("system", ["payments", "email", "ticketing"])
def test_a_record_read_again_has_the_time_it_was_first_answered_with(services, valid, system):
    path, body = valid[system]
    first = httpx.post(f"{services[system]}{path}", json=body, headers=_headers(body)).json()
    [again] = httpx.get(f"{services[system]}{path}", params={"reference": body["reference"]}).json()
    assert first["created_at"] == again["created_at"] and again["created_at"].endswith("Z")
    if system == "payments":  # the replay of the same request answers with the same time
        replay = httpx.post(f"{services[system]}{path}", json=body, headers=_headers(body)).json()
        assert replay["replayed"] and replay["created_at"] == first["created_at"]
