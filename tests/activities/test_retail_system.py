"""The retail system of record on real SQLite and PostgreSQL databases: its backend (stores,
reads, keyed writes through the ledger, concurrency, the τ-bench dev tasks' hashes) and its own
interface (customer-scoped calls, ``invoke`` with typed outcomes, and the registry its
decorators fill).

PostgreSQL: STATEKEEPER_TEST_POSTGRES_URL (default the local ``test`` database). If it
is unreachable the PostgreSQL cases FAIL, unless STATEKEEPER_SKIP_POSTGRES=1.
Each test works in its own store and drops it afterwards; the tables are shared.

Its pure parts (refusal reasons, declaration checks) are tests/core/test_retail_declarations.py.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import uuid
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import pytest
import sqlalchemy as sa

from systems.retail import DATA_DIR, load_data
from systems.retail.backend import (
    IdempotencyKeyConflict, InvokeResult, Outcome, RetailBackend, UnknownStoreError, WriteOutcome, make_engine,
)
from systems.retail.hashing import data_hash
from systems.retail.rows import Referenced, Rows, Section, rows
from systems.retail.tools import (
    CANCEL_REASONS, TOOL_SPECS, TOOLS, UnknownToolError, has_tool, is_read_tool, is_write_tool, read_tool,
    run_tool, write_tool,
)
from tests.core.test_retail_declarations import scratch_registry  # noqa: F401 - fixture


# --- The backend ---

PG_URL = os.environ.get("STATEKEEPER_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
INITIAL_HASH = "5a4b2cb59f4d12dea7e4adff24a7f8fada510ead49372ea4a729a82bbb5f49b5"
DEV_TASKS = json.loads((DATA_DIR / "tasks_dev.json").read_text())

CANCEL = ("cancel_pending_order", {"order_id": "#W5442520", "reason": "no longer needed"})
CANCEL_HASH = "7799ecf069695b50801836738ce907e1ae43174964dc610d726c89a7ce06808e"  # dev task 0


@pytest.fixture(scope="module")
def pg_url(request) -> str:
    """The run's own PostgreSQL database (``pg_run_url``), after checking the server answers."""
    try:
        engine = sa.create_engine(PG_URL)
        with engine.connect() as conn:
            conn.exec_driver_sql("select 1")
        engine.dispose()
    except sa.exc.OperationalError as e:
        if os.environ.get("STATEKEEPER_SKIP_POSTGRES") == "1":
            pytest.skip(f"PostgreSQL unreachable and STATEKEEPER_SKIP_POSTGRES=1: {e}")
        pytest.fail(f"PostgreSQL unreachable at {PG_URL} (set STATEKEEPER_SKIP_POSTGRES=1 to skip): {e}")
    return request.getfixturevalue("pg_run_url")


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'sor.db'}"
    return request.getfixturevalue("pg_url")


class Env:
    """A backend, its URL, one fresh store, and a way to open more engines."""

    def __init__(self, url: str):
        self.url = url
        self.engines: list[sa.Engine] = []
        self.backend = self.new_backend()
        self.backend.create_schema()
        self.store = f"t_{uuid.uuid4().hex[:16]}"
        self.backend.seed_store(self.store)

    def new_backend(self) -> RetailBackend:
        engine = make_engine(self.url)
        self.engines.append(engine)
        return RetailBackend(engine)

    def close(self) -> None:
        self.backend.drop_store(self.store)
        for engine in self.engines:
            engine.dispose()


@pytest.fixture
def env(db_url) -> Iterator[Env]:
    env = Env(db_url)
    yield env
    env.close()


def applied_once(tool: str, kwargs: dict) -> str:
    """Hash of the initial data after applying the write once with the pure tool."""
    key = (tool, json.dumps(kwargs, sort_keys=True))
    if key not in _APPLIED_ONCE:
        data = load_data()
        run_tool(data, tool, kwargs)
        _APPLIED_ONCE[key] = data_hash(data)
    return _APPLIED_ONCE[key]


_APPLIED_ONCE: dict[tuple[str, str], str] = {}


def run_together(calls: list[Callable[[], Any]]) -> list[Any]:
    """Start all calls at the same instant, each in its own thread; return results."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def worker(i: int) -> None:
        barrier.wait()
        try:
            results[i] = calls[i]()
        except BaseException as e:  # surfaced by the assertion below
            results[i] = e

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(isinstance(r, BaseException) for r in results), results
    return results


# ---------------------------------------------------------------- stores


def test_seed_export_and_drop(env):
    b, store = env.backend, env.store
    assert b.store_exists(store)
    exported = b.export(store)
    assert data_hash(exported) == INITIAL_HASH
    assert exported == load_data()
    assert [list(exported[s]) for s in exported] == [list(d) for d in load_data().values()]  # file order
    assert b.seed_store(store) is False
    b.write(store, *CANCEL, "k")
    assert b.seed_store(store, replace=True) is True
    assert b.hash(store) == INITIAL_HASH and b.ledger_entries(store) == []
    b.drop_store(store)
    assert not b.store_exists(store)
    with pytest.raises(UnknownStoreError):
        b.export(store)
    with pytest.raises(UnknownStoreError):
        b.read(store, "get_order_details", {"order_id": "#W5442520"})


def test_schema_creation_is_idempotent(env):
    env.backend.create_schema()
    env.new_backend().create_schema()


# ---------------------------------------------------------------- reads


READS = [
    ("find_user_id_by_email", {"email": "Noah.Brown7922@example.com"}),
    ("find_user_id_by_email", {"email": "nobody@example.com"}),
    ("find_user_id_by_name_zip", {"first_name": "olivia", "last_name": "ITO", "zip": "80218"}),
    ("find_user_id_by_name_zip", {"first_name": "Olivia", "last_name": "Ito", "zip": "00000"}),
    ("get_user_details", {"user_id": "olivia_ito_3591"}),
    ("get_user_details", {"user_id": "nobody"}),
    ("get_order_details", {"order_id": "#W5442520"}),
    ("get_order_details", {"order_id": "#W0"}),
    ("get_product_details", {"product_id": "9523456873"}),
    ("get_product_details", {"product_id": "0"}),
    ("list_all_product_types", {}),
    ("calculate", {"expression": "(3 + 4.5) / 2"}),
    ("think", {"thought": "x"}),
]


def test_reads_match_pure_tools(env):
    data = load_data()
    for tool, kwargs in READS:
        assert env.backend.read(env.store, tool, kwargs) == run_tool(data, tool, kwargs), tool


def test_reads_see_writes(env):
    b, store = env.backend, env.store
    address = {"address1": "1 A St", "address2": "", "city": "X", "state": "CA", "country": "USA", "zip": "99999"}
    b.write(store, "modify_user_address", {"user_id": "olivia_ito_3591", **address}, "k")
    kwargs = {"first_name": "Olivia", "last_name": "Ito", "zip": "99999"}
    assert b.read(store, "find_user_id_by_name_zip", kwargs) == "olivia_ito_3591"
    assert b.read(store, "find_user_id_by_name_zip", {**kwargs, "zip": "80218"}) == "Error: user not found"


def test_tool_kind_checks(env):
    b, store = env.backend, env.store
    with pytest.raises(ValueError):
        b.read(store, *CANCEL)
    with pytest.raises(ValueError):
        b.write(store, "get_order_details", {"order_id": "#W5442520"}, "k")
    with pytest.raises(UnknownToolError):
        b.write(store, "drop_tables", {}, "k")


# ---------------------------------------------------------------- writes


def test_write_then_replay(env):
    b, store = env.backend, env.store
    first = b.write(store, *CANCEL, "key-1")
    assert first.ok and not first.replayed and json.loads(first.result)["status"] == "cancelled"
    assert b.hash(store) == CANCEL_HASH
    again = b.write(store, *CANCEL, "key-1")
    assert again == WriteOutcome(result=first.result, ok=True, replayed=True)
    assert b.hash(store) == CANCEL_HASH
    assert len(b.ledger_entries(store)) == 1 and b.duplicate_writes(store) == 0
    with pytest.raises(IdempotencyKeyConflict):
        b.write(store, "cancel_pending_order", {**CANCEL[1], "reason": "ordered by mistake"}, "key-1")


def test_error_results_are_recorded_and_change_nothing(env):
    b, store = env.backend, env.store
    kwargs = {"order_id": "#W2611340", "reason": "no longer needed"}  # processed
    outcome = b.write(store, "cancel_pending_order", kwargs, "e1")
    assert outcome == WriteOutcome(result="Error: non-pending order cannot be cancelled", ok=False, replayed=False)
    assert b.write(store, "cancel_pending_order", kwargs, "e1").replayed
    (entry,) = b.ledger_entries(store)
    assert entry["ok"] is False and entry["result"] == outcome.result and entry["created_at"].tzinfo
    assert b.hash(store) == INITIAL_HASH
    assert b.duplicate_writes(store) == 0


def test_transfer_is_recorded_only(env):
    b, store = env.backend, env.store
    outcome = b.write(store, "transfer_to_human_agents", {"summary": "wants a human"}, "t1")
    assert outcome.result == "Transfer successful" and outcome.ok
    assert b.hash(store) == INITIAL_HASH
    assert [e["tool"] for e in b.ledger_entries(store)] == ["transfer_to_human_agents"]


def test_duplicate_writes_counts_repeats_under_new_keys(env):
    b, store = env.backend, env.store
    address = {"address1": "1 A St", "address2": "", "city": "X", "state": "CA", "country": "USA", "zip": "99999"}
    kwargs = {"user_id": "olivia_ito_3591", **address}
    assert not b.write(store, "modify_user_address", kwargs, "a").replayed
    assert not b.write(store, "modify_user_address", kwargs, "b").replayed
    assert b.duplicate_writes(store) == 1


@contextmanager
def rows_locked(env: Env, order_id: str) -> Iterator[None]:
    """Hold the write lock a writer needs, so racing writers all queue up behind it."""
    if env.backend.engine.dialect.name == "sqlite":
        path = sa.make_url(env.url).database
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    engine = sa.create_engine(env.url)
    try:
        with engine.connect() as conn, conn.begin():
            conn.exec_driver_sql(
                "SELECT 1 FROM orders WHERE store = %(s)s AND order_id = %(o)s FOR UPDATE",
                {"s": env.store, "o": order_id},
            )
            yield
    finally:
        engine.dispose()


@pytest.mark.parametrize("separate_engines", [False, True], ids=["threads", "engines"])
def test_same_key_concurrently_applies_once(env, separate_engines):
    backends = [env.new_backend() if separate_engines else env.backend for _ in range(2)]
    calls = [lambda b=b: b.write(env.store, *CANCEL, "race") for b in backends]
    # Both writers start while the order is locked, so both get past the ledger check
    # (PostgreSQL) or queue on BEGIN IMMEDIATE (SQLite) before either can commit.
    with rows_locked(env, CANCEL[1]["order_id"]):
        results: list[Any] = [None, None]
        threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, calls[i]())) for i in range(2)]
        for t in threads:
            t.start()
        time.sleep(0.5)
    for t in threads:
        t.join(30)
    assert sorted(r.replayed for r in results) == [False, True]
    assert results[0].result == results[1].result and results[0].ok
    assert env.backend.duplicate_writes(env.store) == 0
    assert len(env.backend.ledger_entries(env.store)) == 1
    assert env.backend.hash(env.store) == CANCEL_HASH == applied_once(*CANCEL)


@pytest.mark.parametrize("separate_engines", [False, True], ids=["threads", "engines"])
def test_same_key_burst_applies_once(env, separate_engines):
    tool = "modify_pending_order_payment"
    kwargs = {"order_id": "#W6779827", "payment_method_id": "credit_card_9789590"}  # refunds a gift card
    backends = [env.new_backend() if separate_engines else env.backend for _ in range(4)]
    results = run_together([lambda b=b: b.write(env.store, tool, kwargs, "burst") for b in backends])
    assert [r.replayed for r in results].count(False) == 1
    assert len({r.result for r in results}) == 1 and results[0].ok
    assert env.backend.duplicate_writes(env.store) == 0
    assert env.backend.hash(env.store) == applied_once(tool, kwargs)


def test_different_keys_same_cancel_serialize(env):
    b = env.backend
    results = run_together([lambda k=k: b.write(env.store, *CANCEL, k) for k in ("k1", "k2", "k3")])
    assert sorted(r.ok for r in results) == [False, False, True]
    assert {r.result for r in results if not r.ok} == {"Error: non-pending order cannot be cancelled"}
    assert b.hash(env.store) == CANCEL_HASH and b.duplicate_writes(env.store) == 0


@pytest.mark.parametrize("separate_engines", [False, True], ids=["threads", "engines"])
def test_email_and_ticket_exactly_once(env, separate_engines):
    backends = [env.new_backend() if separate_engines else env.backend for _ in range(4)]
    store = env.store
    email = ("m1", "a@example.com", "Return", "Ship it back")
    sent = run_together([lambda b=b: b.enqueue_email(store, *email) for b in backends])
    assert sorted(sent) == [False, False, False, True]
    ticket_args = ("t1", "olivia_ito_3591", "human please")
    opened = run_together([lambda b=b: b.open_ticket(store, *ticket_args) for b in backends])
    assert sorted(opened) == [False, False, False, True]
    (message,) = env.backend.outbox_messages(store)
    assert (message["to_email"], message["subject"], message["body"]) == ("a@example.com", "Return", "Ship it back")
    (ticket,) = env.backend.tickets(store)
    assert ticket["user_id"] == "olivia_ito_3591" and ticket["summary"] == "human please"
    assert env.backend.enqueue_email(store, "m2", "a@example.com", "Other", "x") is True
    assert len(env.backend.outbox_messages(store)) == 2


def test_a_ticket_is_found_by_its_key_in_its_store_only(env):
    # ``find_ticket``: the workflow asks before parking a write whose approval expired in a run before
    b, key = env.backend, "approval-expired:cancel_pending_order:#W1:desk.t3"
    assert b.ticket_opened(env.store, key) is False
    assert b.open_ticket(env.store, key, "olivia_ito_3591", "expired undecided") is True
    assert b.ticket_opened(env.store, key) is True
    assert b.ticket_opened(env.store, key + "0") is False and b.ticket_opened("another-store", key) is False
    assert len(b.tickets(env.store)) == 1  # asking opened nothing


# ---------------------------------------------------------------- dev task replay


def replay_through_backend(b: RetailBackend, store: str, task: dict) -> str:
    for i, action in enumerate(task["actions"]):
        if action["name"] == "transfer_to_human_agents":
            continue
        key = f"{task['task_index']}:{i}"
        first = b.write(store, action["name"], action["kwargs"], key)
        assert not first.replayed
        # A retried activity must not apply twice.
        assert b.write(store, action["name"], action["kwargs"], key) == first.model_copy(update={"replayed": True})
    return b.hash(store)


def test_dev_tasks_replay_through_sqlite(tmp_path):
    b = RetailBackend(make_engine(f"sqlite:///{tmp_path / 'dev.db'}"))
    b.create_schema()
    for task in DEV_TASKS:
        store = f"dev_{task['task_index']}"
        b.seed_store(store)
        assert replay_through_backend(b, store, task) == task["gt_data_hash"], task["task_index"]
        assert b.duplicate_writes(store) == 0
    b.engine.dispose()


def test_dev_tasks_replay_through_postgres(pg_url):
    b = RetailBackend(make_engine(pg_url))
    b.create_schema()
    busy = sorted(DEV_TASKS, key=lambda t: -len(t["actions"]))[:5]
    for task in busy:
        store = f"t_{uuid.uuid4().hex[:12]}"
        b.seed_store(store)
        try:
            assert replay_through_backend(b, store, task) == task["gt_data_hash"], task["task_index"]
        finally:
            b.drop_store(store)
    b.engine.dispose()


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_memoised_hash_equals_the_benchmark_formula_after_writes(tmp_path, database, request):
    url = f"sqlite:///{tmp_path / 'h.sqlite'}" if database == "sqlite" else request.getfixturevalue("pg_url")
    backend = RetailBackend(make_engine(url))
    backend.create_schema()
    store = f"h{uuid.uuid4().hex[:8]}"
    backend.seed_store(store)
    try:
        assert backend.hash(store) == data_hash(backend.export(store)) == INITIAL_HASH
        backend.write(store, "cancel_pending_order", {"order_id": "#W5442520", "reason": "no longer needed"}, "k1")
        assert backend.hash(store) == data_hash(backend.export(store)) != INITIAL_HASH
        assert backend.hash(store) == backend.hash(store)  # memo hit path
    finally:
        backend.drop_store(store)


# --- The system's interface ---

OLIVIA, OWN_ORDER = "olivia_ito_3591", "#W5442520"  # a pending order of hers
OTHERS_ORDER = "#W9502127"  # daiki_johnson_9523's, delivered
NOT_FOUND = "Error: order not found"


# ---------------------------------------------------------------- customer scope


def test_scoped_read_finds_the_customers_own_order(env):
    own = env.backend.read(env.store, "get_order_details", {"order_id": OWN_ORDER}, scope_user_id=OLIVIA)
    assert json.loads(own)["user_id"] == OLIVIA
    assert own == env.backend.read(env.store, "get_order_details", {"order_id": OWN_ORDER})


@pytest.mark.parametrize("order_id", [OTHERS_ORDER, "#W0000000", "9502126", "#9502127", "#W9502127 ", ""])
def test_scoped_read_of_another_customers_order_is_a_missing_order(env, order_id):
    kwargs = {"order_id": order_id}
    assert env.backend.read(env.store, "get_order_details", kwargs, scope_user_id=OLIVIA) == NOT_FOUND
    result = env.backend.invoke(env.store, "get_order_details", kwargs, scope_user_id=OLIVIA)
    assert result == InvokeResult(tool="get_order_details", outcome=Outcome.REFUSED, result=NOT_FOUND,
                                  reason="order not found", replayed=False)


def test_unscoped_read_still_sees_every_order(env):
    assert json.loads(env.backend.read(env.store, "get_order_details", {"order_id": OTHERS_ORDER}))["status"]


def test_scope_leaves_unowned_rows_alone(env):
    b, store = env.backend, env.store
    for tool, kwargs in [("get_product_details", {"product_id": "9523456873"}), ("list_all_product_types", {}),
                         ("get_user_details", {"user_id": OLIVIA})]:
        assert b.read(store, tool, kwargs, scope_user_id=OLIVIA) == b.read(store, tool, kwargs), tool


def test_scoped_write_cannot_touch_another_customers_order(env):
    b, store = env.backend, env.store
    kwargs = {"order_id": OTHERS_ORDER, "item_ids": ["x"], "payment_method_id": "gift_card_1"}
    outcome = b.write(store, "return_delivered_order_items", kwargs, "r1", scope_user_id=OLIVIA)
    assert (outcome.result, outcome.ok) == (NOT_FOUND, False)
    cancel = {"order_id": OWN_ORDER, "reason": "no longer needed"}
    assert b.write(store, "cancel_pending_order", cancel, "c1", scope_user_id=OLIVIA).ok
    assert b.write(store, "cancel_pending_order", cancel, "c1", scope_user_id=OLIVIA).replayed
    with pytest.raises(IdempotencyKeyConflict):  # the scope is part of what the key recorded
        b.write(store, "cancel_pending_order", cancel, "c1", scope_user_id="daiki_johnson_9523")


# ---------------------------------------------------------------- invoke


def test_invoke_reads(env):
    b, store = env.backend, env.store
    found = b.invoke(store, "find_user_id_by_email", {"email": "Noah.Brown7922@example.com"}, idempotency_key="ignored")
    assert found.applied and not found.refused and found.reason is None and not found.replayed
    assert found.result == b.read(store, "find_user_id_by_email", {"email": "Noah.Brown7922@example.com"})
    assert b.invoke(store, "think", {"thought": "x"}) == InvokeResult(tool="think", outcome=Outcome.APPLIED, result="")
    bad = b.invoke(store, "calculate", {"expression": "1 / 0"})
    assert bad.outcome is Outcome.REFUSED and bad.reason == "division by zero"


def test_invoke_writes_once_and_classifies(env):
    b, store = env.backend, env.store
    cancel = {"order_id": OWN_ORDER, "reason": "no longer needed"}
    first = b.invoke(store, "cancel_pending_order", cancel, idempotency_key="w1")
    assert first.outcome is Outcome.APPLIED and not first.replayed and json.loads(first.result)["status"] == "cancelled"
    again = b.invoke(store, "cancel_pending_order", cancel, idempotency_key="w1")
    assert again == first.model_copy(update={"replayed": True})
    refused = b.invoke(store, "cancel_pending_order", cancel, idempotency_key="w2")
    assert refused.refused and refused.reason == "non-pending order cannot be cancelled" and not refused.replayed
    assert b.invoke(store, "cancel_pending_order", cancel, idempotency_key="w2").replayed
    assert b.duplicate_writes(store) == 0


def test_invoke_guard_refuses_atomically(env):
    b, store = env.backend, env.store
    seen: list[dict] = []

    def guard(data: dict) -> str | None:
        seen.append(data)
        return "Error: held for review"

    kwargs = {"order_id": OWN_ORDER, "reason": "no longer needed"}
    result = b.invoke(store, "cancel_pending_order", kwargs, idempotency_key="g1", guard=guard)
    assert result.refused and result.reason == "held for review"
    assert set(seen[0]["orders"]) == {OWN_ORDER} and set(seen[0]["users"]) == {OLIVIA}
    assert b.hash(store) == INITIAL_HASH


def test_invoke_errors_raise(env):
    b, store = env.backend, env.store
    with pytest.raises(ValueError):
        b.invoke(store, "cancel_pending_order", {"order_id": OWN_ORDER, "reason": "no longer needed"})
    with pytest.raises(UnknownToolError):
        b.invoke(store, "drop_tables", {})
    with pytest.raises(UnknownStoreError):
        b.invoke("no_such_store", "get_order_details", {"order_id": OWN_ORDER})


# ---------------------------------------------------------------- the registry


def test_the_catalogue_answers_from_the_registry(env):
    assert has_tool("get_order_details") and not has_tool("get_item_price")
    assert is_read_tool("list_all_product_types") and is_write_tool("transfer_to_human_agents")
    assert env.backend.has_tool("calculate") and not env.backend.is_read_tool("cancel_pending_order")
    with pytest.raises(UnknownToolError):
        is_read_tool("drop_tables")
    assert set(TOOL_SPECS) == set(TOOLS)
    assert TOOL_SPECS["exchange_delivered_order_items"].locks == Rows.ORDER_AND_OWNER
    assert TOOL_SPECS["exchange_delivered_order_items"].loads == Rows.ORDER_PRODUCTS
    assert CANCEL_REASONS == ("no longer needed", "ordered by mistake")


def test_a_new_read_tool_is_one_decorated_function(env, scratch_registry):
    @read_tool(loads=Rows.ALL_PRODUCTS)
    def cheapest_available_item(data: dict, product_name: str) -> str:
        for product in data["products"].values():
            if product["name"] == product_name:
                prices = [v["price"] for v in product["variants"].values() if v["available"]]
                return json.dumps(min(prices)) if prices else "Error: none available"
        return "Error: product not found"

    assert is_read_tool("cheapest_available_item") and "cheapest_available_item" not in TOOLS
    for kwargs in ({"product_name": "T-Shirt"}, {"product_name": "Nothing"}, {}):
        expected = run_tool(load_data(), "cheapest_available_item", kwargs)
        assert env.backend.read(env.store, "cheapest_available_item", kwargs) == expected


def test_a_write_that_changes_rows_it_did_not_lock_is_refused(env, scratch_registry):
    @write_tool(locks=Rows.ORDER, loads=rows(Referenced(Section.USERS, Section.ORDERS, "user_id")))
    def rename_owner(data: dict, order_id: str) -> str:
        for user in data["users"].values():
            user["name"]["first_name"] = "Mallory"
        return "ok"

    with pytest.raises(RuntimeError, match="did not lock"):
        env.backend.write(env.store, "rename_owner", {"order_id": OWN_ORDER}, "x1")
    assert env.backend.hash(env.store) == INITIAL_HASH and env.backend.ledger_entries(env.store) == []


@pytest.mark.parametrize("order_id", ["\x00", "#W4566809\x00"])
def test_ids_holding_a_nul_match_nothing_on_every_database(env, order_id):
    """PostgreSQL text cannot hold NUL: such an id must answer "not found", not fail the query
    (a failed query is retried as an infrastructure failure and ends in "can't reach")."""
    b, store = env.backend, env.store
    assert b.read(store, "get_order_details", {"order_id": order_id}, scope_user_id=OLIVIA) == NOT_FOUND
    assert b.read(store, "get_product_details", {"product_id": order_id}) == "Error: product not found"
    assert b.read(store, "find_user_id_by_email", {"email": f"a{order_id}@b.co"}) == "Error: user not found"
