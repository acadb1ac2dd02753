"""The retail system's own interface: customer-scoped calls, ``invoke`` with typed
outcomes, and the registry its decorators fill. Database cases run on SQLite and
PostgreSQL (same fixtures and rules as test_retail_backend.py).

Its pure parts (refusal reasons, declaration checks) are tests/core/test_retail_declarations.py.
"""

from __future__ import annotations

import json

import pytest

from systems.retail import load_data
from systems.retail.backend import (
    IdempotencyKeyConflict,
    InvokeResult,
    Outcome,
    UnknownStoreError,
)
from systems.retail.rows import Referenced, Rows, Section, rows
from systems.retail.tools import (
    CANCEL_REASONS,
    TOOL_SPECS,
    TOOLS,
    UnknownToolError,
    has_tool,
    is_read_tool,
    is_write_tool,
    read_tool,
    run_tool,
    write_tool,
)
from tests.activities.test_retail_backend import INITIAL_HASH, Env, db_url, env, pg_url  # noqa: F401 - fixtures
from tests.core.test_retail_declarations import scratch_registry  # noqa: F401 - fixture

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
