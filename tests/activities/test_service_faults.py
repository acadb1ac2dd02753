"""The external services failing, over real HTTP:

- each fault kind against each service's adapter: what the caller is told, and that the effect
  exists exactly once after the next attempt (the unknown-outcome protocol asks the service by
  key or reference before sending again), with keys that hold '#', ':' and '.';
- a failed request is logged through the process's root logger and its redaction
  (``starter.runtime.logs``), never by handlers of uvicorn's own: the dev process serves the
  services beside its worker, and a SQLite "database is locked" traceback under load carries a
  payment method id in its SQL parameters.

Real payments, email and ticketing services (uvicorn, SQLite files) and the real adapters.
"""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from activities.channels_http import HttpOutbox, HttpTickets
from activities.deadline import deadline_in
from activities.payments_port import HttpPayments
from activities.ports import PortError
from activities.reconcile import Ambiguous, DispatchLog, NotDone, OutcomeUnknown
from systems.retail.engine import make_engine
from systems.service_kit.server import ServiceThread
from tests.log_capture import root_log
from tests.service_fixtures import arm, services  # noqa: F401 - fixture
from workflows.domain.errors import ErrorType


FAULTS = ("http_5xx", "fail_before_commit", "commit_then_drop", "answer_after_timeout", "slow_lock")
FIRST_ATTEMPT_RAISES = {"http_5xx": NotDone, "fail_before_commit": Ambiguous, "commit_then_drop": Ambiguous,
                        "answer_after_timeout": Ambiguous, "slow_lock": NotDone}  # the service honours the deadline: 504
COMMITTED_BY_FIRST = {"commit_then_drop", "answer_after_timeout"}
FIRST_DEADLINE_SECONDS = 3.0
"""The first attempt's deadline: the faults are timed from it (an answer held past it, locks held
past it), so it only needs room for the adapter's look-up and send on a busy machine."""
MOVEMENTS = [{"transaction_type": "refund", "amount": "54.04", "payment_method_id": "credit_card_1"}]


def _log(tmp_path: Path) -> DispatchLog:
    return DispatchLog(make_engine(f"sqlite:///{tmp_path / 'dispatch.sqlite'}"))


def _adapters(services: dict[str, str], tmp_path: Path):  # noqa: F811
    log = _log(tmp_path)
    return {
        "payments": (HttpPayments(services["payments"], 2.0, log),
                     lambda a: a.move("pay:k-1", "#W1", "cancel_pending_order", MOVEMENTS),
                     lambda a: len(a.operations("#W1"))),
        "email": (HttpOutbox(services["email"], 2.0, log),
                  lambda a: a.enqueue_email("s", "email:k-1", "a@example.com", "subject", "body"),
                  lambda a: len(a.sent("email:k-1"))),
        "ticketing": (HttpTickets(services["ticketing"], 2.0, log),
                      lambda a: a.open_ticket("s", "escalate:k-1", "user_1", "summary"),
                      lambda a: len(a.sent("escalate:k-1"))),
    }


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("system", ["payments", "email", "ticketing"])
def test_each_fault_then_a_retry_leaves_exactly_one_effect(services, tmp_path, system, fault):  # noqa: F811
    adapter, effect, count = _adapters(services, tmp_path)[system]
    arm(services[system], fault)
    with deadline_in(FIRST_DEADLINE_SECONDS), pytest.raises(FIRST_ATTEMPT_RAISES[fault]):
        effect(adapter)
    assert count(adapter) == (1 if fault in COMMITTED_BY_FIRST else 0)  # nothing commits late
    with deadline_in(5.0):
        effect(adapter)  # the next attempt: asks first, then sends only if absent
    assert count(adapter) == 1
    with deadline_in(5.0):
        effect(adapter)  # and again: still one
    assert count(adapter) == 1


def test_a_slow_lock_never_commits_after_the_callers_deadline(services, tmp_path):  # noqa: F811
    payments = HttpPayments(services["payments"], 5.0, _log(tmp_path))
    arm(services["payments"], "slow_lock", seconds=3.0)
    with deadline_in(1.0), pytest.raises((Ambiguous, NotDone)):
        payments.move("pay:k-2", "#W2", "cancel_pending_order", MOVEMENTS)
    import time
    time.sleep(3.0)  # the lock's holder has finished by now: it rolled back
    assert payments.operations("#W2") == []


def test_a_repeated_idempotency_key_returns_the_first_result(services):  # noqa: F811
    body = {"reference": "#W3", "kind": "cancel_pending_order", "movements": MOVEMENTS}
    first = httpx.post(f"{services['payments']}/operations", json=body, headers={"Idempotency-Key": "k-3"})
    again = httpx.post(f"{services['payments']}/operations", json=body, headers={"Idempotency-Key": "k-3"})
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["created_at"][:19] == first.json()["created_at"][:19] and again.json()["replayed"]
    other = httpx.post(f"{services['payments']}/operations",  # another amount (an empty operation is a 422)
                       json={**body, "movements": [{**MOVEMENTS[0], "amount": "1.00"}]},
                       headers={"Idempotency-Key": "k-3"})
    assert other.status_code == 409
    assert httpx.get(f"{services['payments']}/operations/k-3").status_code == 200
    assert httpx.get(f"{services['payments']}/operations/k-absent").status_code == 404


def test_an_unreachable_system_after_a_dispatch_is_outcome_unknown(services, tmp_path):  # noqa: F811
    log = _log(tmp_path)
    log.mark("email:email:k-4", "email", "dispatched")  # an earlier attempt sent it, then lost the answer
    outbox = HttpOutbox("http://127.0.0.1:9", 1.0, log)  # nothing listens there
    with pytest.raises(OutcomeUnknown) as raised:
        outbox.enqueue_email("s", "email:k-4", "a@example.com", "s", "b")
    assert raised.value.error_type is ErrorType.OUTCOME_UNKNOWN
    assert isinstance(raised.value, PortError)


def test_invalid_data_is_a_deterministic_refusal(services, tmp_path):  # noqa: F811
    payments = HttpPayments(services["payments"], 2.0, _log(tmp_path))
    bad = [{"transaction_type": "refund", "amount": "-1.00", "payment_method_id": "x"}]
    with pytest.raises(PortError) as raised:
        payments.move("pay:k-5", "#W5", "cancel_pending_order", bad)
    assert raised.value.error_type is ErrorType.INVALID_DATA
    assert payments.operations("#W5") == []


def test_concurrent_requests_with_one_key_move_money_once_on_postgresql():
    """Eight callers race with one Idempotency-Key on PostgreSQL: one operation is recorded and
    every caller gets its result."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.service_fixtures import postgres_services

    body = {"reference": "#W6", "kind": "cancel_pending_order", "movements": MOVEMENTS}
    with postgres_services() as urls:
        def post(_: int) -> httpx.Response:
            return httpx.post(f"{urls['payments']}/operations", json=body, headers={"Idempotency-Key": "k-6"},
                              timeout=10)

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(post, range(8)))
        assert sorted(a.status_code for a in answers) == [200] * 7 + [201]
        assert len({a.json()["created_at"] for a in answers}) == 1
        assert len(httpx.get(f"{urls['payments']}/operations", params={"reference": "#W6"}).json()) == 1


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_on_postgresql_then_a_retry_leaves_exactly_one_payment(tmp_path, fault):
    """The same on PostgreSQL, where ``slow_lock`` holds a real transaction (``pg_sleep``) that
    the caller's deadline cuts through ``statement_timeout``."""
    from tests.service_fixtures import postgres_services

    with postgres_services() as urls:
        payments = HttpPayments(urls["payments"], 2.0, _log(tmp_path))
        arm(urls["payments"], fault)
        with deadline_in(FIRST_DEADLINE_SECONDS), pytest.raises(FIRST_ATTEMPT_RAISES[fault]):
            payments.move("pay:k-7", "#W7", "cancel_pending_order", MOVEMENTS)
        assert len(payments.operations("#W7")) == (1 if fault in COMMITTED_BY_FIRST else 0)
        with deadline_in(5.0):
            payments.move("pay:k-7", "#W7", "cancel_pending_order", MOVEMENTS)
        assert len(payments.operations("#W7")) == 1


def test_an_operation_is_found_by_its_key_whatever_the_key_holds(services, tmp_path):  # noqa: F811
    # real keys hold '#' (order ids), ':' and '.'; a '#' sent unquoted would cut the lookup's path,
    # so every retry after an ambiguous failure would be re-sent instead of found
    payments = HttpPayments(services["payments"], 2.0, _log(tmp_path))
    key = "pay:cancel_pending_order:#W4566809:desk-43.t3/x"
    assert payments.find(key) is None
    with deadline_in(5.0):
        moved = payments.move(key, "#W4566809", "cancel_pending_order", MOVEMENTS)
    assert moved["movements"] == len(MOVEMENTS) and payments.find(key)["movements"] == len(MOVEMENTS)
    assert payments.find(key.replace("#", "%23")) is None  # the key itself, not a decoded variant


def test_a_ticket_is_found_by_its_key_over_http(services, tmp_path):  # noqa: F811
    # ``HttpTickets.ticket_opened``: asked by reference ('#', ':' and '.' in it), opens nothing
    tickets = HttpTickets(services["ticketing"], 2.0, _log(tmp_path))
    key = "approval-expired:cancel_pending_order:#W4566809:desk-43.t3"
    assert tickets.ticket_opened("s", key) is False
    with deadline_in(5.0):
        assert tickets.open_ticket("s", key, "user_1", "expired undecided") is True
    assert tickets.ticket_opened("s", key) is True and tickets.ticket_opened("s", key + "0") is False
    assert len(tickets.sent(key)) == 1


def test_a_key_naming_a_non_ascii_conversation_moves_money_once(services, tmp_path):  # noqa: F811
    # the Python client takes any conversation id without control characters; a key holding
    # 'é' could not go into the Idempotency-Key header (UnicodeEncodeError on every attempt,
    # after the order's write had committed: the cancel escalated as "could not be reached")
    payments = HttpPayments(services["payments"], 2.0, _log(tmp_path))
    key, twin = "pay:cancel_pending_order:#W4566810:café-1.t3", "pay:cancel_pending_order:#W4566810:caf%C3%A9-1.t3"
    with deadline_in(5.0):
        moved = payments.move(key, "#W4566810", "cancel_pending_order", MOVEMENTS)
        again = payments.move(key, "#W4566810", "cancel_pending_order", MOVEMENTS)
    assert moved["movements"] == len(MOVEMENTS) and not moved["replayed"] and again["replayed"]
    assert payments.find(key)["movements"] == len(MOVEMENTS) and payments.find(twin) is None  # distinct keys
    assert len(payments.operations("#W4566810")) == 1


@pytest.mark.parametrize("seconds", ["-1", "nan", "1e9"])
def test_fault_seconds_out_of_range_in_the_header_are_refused_before_any_work(services, seconds):  # noqa: F811
    # the header has the bounds of POST /_faults (0 to 120 s): "-1" would commit the payment and
    # then answer 500 (time.sleep(-1)); "1e9" with slow_lock would hold the write lock for ever
    url, key = services["payments"], f"k-fault-seconds-{seconds}"
    body = {"reference": "#W-fs", "kind": "cancel_pending_order", "movements": MOVEMENTS}
    answer = httpx.post(f"{url}/operations", json=body, headers={
        "Idempotency-Key": key, "X-Fault": "answer_after_timeout", "X-Fault-Seconds": seconds})
    assert answer.status_code == 400 and "nothing was done" in answer.json()["detail"]
    assert httpx.get(f"{url}/operations/{key}").status_code == 404


# --- A failed request is logged redacted ---

SECRET = "paypal_1038468"


def test_a_services_failure_is_logged_redacted():
    app = FastAPI()

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError(f"(sqlite3.OperationalError) database is locked\n[SQL: INSERT INTO payment_operations "
                           f"VALUES (?)]\n[parameters: ('[{{\"payment_method_id\": \"{SECRET}\"}}]',)]")

    uvicorn_log, uvicorn_error = logging.getLogger("uvicorn"), logging.getLogger("uvicorn.error")
    # as in the dev process, where nothing configured uvicorn's loggers (another test's server
    # with uvicorn's default config leaves them with handlers of their own, not propagating)
    with root_log("INFO", "uvicorn", "uvicorn.error") as stream:
        server = ServiceThread(app).start()
        try:
            response = httpx.get(f"http://{server.host}:{server.port}/boom", timeout=10)
        finally:
            server.stop()
        # the service configured none of uvicorn's loggers itself
        assert uvicorn_log.handlers == [] and uvicorn_log.propagate and uvicorn_error.level == logging.NOTSET
    logged = stream.getvalue()
    assert response.status_code == 500
    assert "database is locked" in logged  # the failure is logged, for operators
    assert SECRET not in logged, logged
