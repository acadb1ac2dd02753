"""The pure τ-bench retail tools against the benchmark itself.

The replay test is the real check: every ground-truth action of all 520 tasks, run on
a fresh copy of the data, must land on the benchmark's own ``gt_data_hash``.
Reads tasks_train.json and gt_replay_errors.json from TAUBENCH_RETAIL_DIR
(default /work/shared/taubench-retail).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from systems.retail import DATA_DIR, load_data  # noqa: E402
from systems.retail.hashing import data_hash, to_hashable  # noqa: E402
from systems.retail.tools import (  # noqa: E402
    TOOL_CLASS,
    TOOLS,
    ToolClass,
    UnknownToolError,
    run_tool,
)

BENCH_DIR = Path(os.environ.get("TAUBENCH_RETAIL_DIR", Path(__file__).resolve().parents[3] / "shared" / "taubench-retail"))


def _bench_json(name: str) -> Any:
    path = BENCH_DIR / name
    if not path.exists():
        pytest.fail(f"{path} missing: set TAUBENCH_RETAIL_DIR to the τ-bench retail reference data")
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def gt_errors() -> dict:
    return _bench_json("gt_replay_errors.json")


@pytest.fixture(scope="module")
def base() -> dict:
    return load_data()


@pytest.fixture
def data() -> dict:
    return load_data()


def snapshot(data: dict) -> str:
    return json.dumps(data)


# ---------------------------------------------------------------- hashing & replay


def test_initial_hash_matches_benchmark(base, gt_errors):
    assert data_hash(base) == gt_errors["initial_db_hash"]


def test_to_hashable_shape():
    assert to_hashable({"b": [1, {"d": 2, "c": 3.5}], "a": "x"}) == (
        ("a", "x"),
        ("b", (1, (("c", 3.5), ("d", 2)))),
    )


class FastHasher:
    """``data_hash`` for copy-on-write variants of one base, re-rendering only the
    top-level entries a task touched (a full data_hash costs ~0.1 s; 520 of them would
    blow the test budget). Checked against data_hash in the dev replay."""

    def __init__(self, base: dict):
        self.base = base
        self.keys = {section: sorted(docs) for section, docs in base.items()}
        self.rendered = {
            section: {key: str((key, to_hashable(doc))) for key, doc in docs.items()}
            for section, docs in base.items()
        }

    def hash(self, data: dict, touched: dict[str, set]) -> str:
        assert all(len(data[s]) == len(self.keys[s]) for s in data) and len(data) > 1  # no adds/deletes
        parts = []
        for section in sorted(data):
            rendered = self.rendered[section]
            entries = [
                str((key, to_hashable(data[section][key]))) if key in touched[section] else rendered[key]
                for key in self.keys[section]
            ]
            parts.append(f"({section!r}, ({', '.join(entries)}))")
        return hashlib.sha256(f"({', '.join(parts)})".encode()).hexdigest()


def replay(base: dict, actions: list[dict]) -> tuple[dict, dict[str, set], list[tuple[str, str]]]:
    """Run the actions (minus transfers) on a copy-on-write view of ``base``."""
    data = {section: dict(docs) for section, docs in base.items()}
    touched: dict[str, set] = {section: set() for section in base}

    def own(section: str, key: Any) -> None:
        if isinstance(key, str) and key in data[section] and key not in touched[section]:
            data[section][key] = copy.deepcopy(data[section][key])
            touched[section].add(key)

    errors = []
    for action in actions:
        if action["name"] == "transfer_to_human_agents":
            continue
        kwargs = action["kwargs"]
        own("orders", kwargs.get("order_id"))
        if kwargs.get("order_id") in data["orders"]:
            own("users", data["orders"][kwargs["order_id"]]["user_id"])
        own("users", kwargs.get("user_id"))
        result = run_tool(data, action["name"], kwargs)
        if result.startswith("Error"):
            errors.append((action["name"], result))
    return data, touched, errors


def test_replay_all_ground_truth_tasks(base, gt_errors):
    """All 520 tasks (dev + train) reach the benchmark's gt_data_hash, and exactly the
    ground-truth actions the benchmark rejects return its error strings."""
    base_before = snapshot(base)
    hasher = FastHasher(base)
    mismatched, seen_errors, n = [], [], 0
    for split in ("dev", "train"):
        tasks = _bench_json(f"tasks_{split}.json")
        assert len(tasks) == gt_errors[f"tasks_{split}"]["n"]
        unchanged = 0
        for task in tasks:
            n += 1
            data, touched, errors = replay(base, task["actions"])
            got = hasher.hash(data, touched)
            if split == "dev" and task["task_index"] % 4 == 0:  # FastHasher == data_hash
                assert got == data_hash(data)
            if got != task["gt_data_hash"]:
                mismatched.append((split, task["task_index"]))
            unchanged += got == gt_errors["initial_db_hash"]
            seen_errors += [[task["task_index"], name, error] for name, error in errors]
        assert unchanged == gt_errors[f"tasks_{split}"]["tasks_whose_gt_end_state_equals_initial_db"]
        assert seen_errors == gt_errors[f"tasks_{split}"]["gt_actions_returning_error"], split
        seen_errors = []
    assert n == 520
    assert mismatched == []
    assert snapshot(base) == base_before, "a tool mutated a document it was not expected to touch"


def test_packaged_dev_tasks_are_the_benchmark_ones():
    assert json.loads((DATA_DIR / "tasks_dev.json").read_text()) == _bench_json("tasks_dev.json")


# ---------------------------------------------------------------- registry


def test_tool_classes_cover_all_tools():
    """Every registered tool has a class; the benchmark's 16 are all there with their
    classes (the system may offer more, e.g. τ²-bench's get_item_details)."""
    assert set(TOOL_CLASS) == set(TOOLS)
    schema = _bench_json("tools_schema.json")
    benchmark = {t["function"]["name"] for t in schema}
    assert len(benchmark) == 16 and benchmark <= set(TOOLS)
    reads = {n for n in benchmark if TOOL_CLASS[n] is ToolClass.READ}
    assert reads == {
        "find_user_id_by_email",
        "find_user_id_by_name_zip",
        "get_user_details",
        "get_order_details",
        "get_product_details",
        "list_all_product_types",
        "calculate",
        "think",
    }
    assert {n for n in benchmark if TOOL_CLASS[n] is ToolClass.REVERSIBLE_WRITE} == {
        "modify_pending_order_address",
        "modify_user_address",
    }
    assert ToolClass("irreversible_write") is TOOL_CLASS["transfer_to_human_agents"]


def test_unknown_tool_raises(data):
    with pytest.raises(UnknownToolError):
        run_tool(data, "delete_everything", {})


def test_bad_arguments_are_an_error_result(data):
    before = snapshot(data)
    result = run_tool(data, "cancel_pending_order", {"order_id": "#W5442520"})
    assert result.startswith("Error: ") and "reason" in result
    assert snapshot(data) == before


# ---------------------------------------------------------------- helpers to find fixtures


def first_order(data: dict, status: str, pred=lambda o, u: True) -> dict:
    for order in data["orders"].values():
        if order["status"] == status and pred(order, data["users"][order["user_id"]]):
            return order
    raise LookupError(status)


def gift_cards(user: dict) -> list[dict]:
    return [m for m in user["payment_methods"].values() if m["source"] == "gift_card"]


def other_variant(data: dict, item: dict, available: bool = True) -> dict | None:
    for variant in data["products"][item["product_id"]]["variants"].values():
        if variant["item_id"] != item["item_id"] and variant["available"] is available:
            return variant
    return None


def unaffordable_swap(data: dict, status: str) -> tuple[dict, dict, dict, dict]:
    """An order in ``status``, one of its items, a pricier available variant of it and
    a gift card of the user whose balance is below the price difference."""
    for order in data["orders"].values():
        if order["status"] != status:
            continue
        cards = gift_cards(data["users"][order["user_id"]])
        for item in order["items"]:
            for variant in data["products"][item["product_id"]]["variants"].values():
                diff = round(variant["price"] - item["price"], 2)
                for card in cards:
                    if variant["available"] and card["balance"] < diff:
                        return order, item, variant, card
    raise LookupError(status)


def assert_error(data: dict, tool: str, kwargs: dict, expected: str) -> None:
    before = snapshot(data)
    assert run_tool(data, tool, kwargs) == expected
    assert snapshot(data) == before


# ---------------------------------------------------------------- read tools


def test_find_user_by_email_and_name_zip(data):
    user_id, user = next(iter(data["users"].items()))
    assert run_tool(data, "find_user_id_by_email", {"email": user["email"].upper()}) == user_id
    assert run_tool(data, "find_user_id_by_email", {"email": "nobody@example.com"}) == "Error: user not found"
    name, zip_code = user["name"], user["address"]["zip"]
    kwargs = {"first_name": name["first_name"].lower(), "last_name": name["last_name"].upper(), "zip": zip_code}
    assert run_tool(data, "find_user_id_by_name_zip", kwargs) == user_id
    kwargs["zip"] = "00000"
    assert run_tool(data, "find_user_id_by_name_zip", kwargs) == "Error: user not found"


def test_get_details_and_not_found(data):
    order_id, order = next(iter(data["orders"].items()))
    assert run_tool(data, "get_order_details", {"order_id": order_id}) == json.dumps(order)
    assert run_tool(data, "get_order_details", {"order_id": "#W0"}) == "Error: order not found"
    assert run_tool(data, "get_user_details", {"user_id": "nobody_1"}) == "Error: user not found"
    assert run_tool(data, "get_product_details", {"product_id": "1"}) == "Error: product not found"
    product_id = next(iter(data["products"]))
    details = run_tool(data, "get_product_details", {"product_id": product_id})
    assert json.loads(details) == data["products"][product_id]


def test_list_all_product_types(data):
    listed = json.loads(run_tool(data, "list_all_product_types", {}))
    assert len(listed) == 50 and list(listed) == sorted(listed)
    assert listed["T-Shirt"] == "9523456873"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2 + 2", "4.0"),
        ("(1.5 + 2.25) * 3 / 7", "1.61"),
        (" 10 - 3", "7.0"),
        ("2 ** 10", "1024.0"),
        ("7 // 2", "3.0"),
        ("1 / 0", "Error: division by zero"),
        ("2 +", "Error: invalid syntax (<string>, line 1)"),
        ("import os", "Error: invalid characters in expression"),
        ("9 ** 9 ** 9", "Error: int too large to convert to float"),
    ],
)
def test_calculate(data, expression, expected):
    started = time.monotonic()
    assert run_tool(data, "calculate", {"expression": expression}) == expected
    assert time.monotonic() - started < 5  # a hang guard (9**9**9 must not be evaluated), not a benchmark


def test_think_and_transfer(data):
    before = snapshot(data)
    assert run_tool(data, "think", {"thought": "hm"}) == ""
    assert run_tool(data, "transfer_to_human_agents", {"summary": "wants a human"}) == "Transfer successful"
    assert snapshot(data) == before


# ---------------------------------------------------------------- cancel


def test_cancel_errors(data):
    processed = first_order(data, "processed")
    pending = first_order(data, "pending")
    cancel = "cancel_pending_order"
    assert_error(data, cancel, {"order_id": "#W0000000", "reason": "no longer needed"}, "Error: order not found")
    assert_error(
        data,
        cancel,
        {"order_id": processed["order_id"], "reason": "no longer needed"},
        "Error: non-pending order cannot be cancelled",
    )
    assert_error(data, cancel, {"order_id": pending["order_id"], "reason": "too slow"}, "Error: invalid reason")


def test_cancel_refunds_gift_card_immediately(data):
    order = first_order(data, "pending", lambda o, u: "gift_card" in o["payment_history"][0]["payment_method_id"])
    payment = order["payment_history"][0]
    card = data["users"][order["user_id"]]["payment_methods"][payment["payment_method_id"]]
    balance = card["balance"]
    result = run_tool(data, "cancel_pending_order", {"order_id": order["order_id"], "reason": "ordered by mistake"})
    assert json.loads(result) == order
    assert order["status"] == "cancelled" and order["cancel_reason"] == "ordered by mistake"
    assert order["payment_history"][-1] == {**payment, "transaction_type": "refund"}
    assert card["balance"] == round(balance + payment["amount"], 2)


# ---------------------------------------------------------------- modify pending order


def test_modify_address_and_user_address(data):
    address = {"address1": "1 A St", "address2": "", "city": "X", "state": "CA", "country": "USA", "zip": "94000"}
    processed = first_order(data, "processed")
    assert_error(
        data,
        "modify_pending_order_address",
        {"order_id": processed["order_id"], **address},
        "Error: non-pending order cannot be modified",
    )
    assert_error(data, "modify_user_address", {"user_id": "nobody", **address}, "Error: user not found")
    pending = first_order(data, "pending")
    run_tool(data, "modify_pending_order_address", {"order_id": pending["order_id"], **address})
    assert list(pending["address"].items()) == list(address.items())
    run_tool(data, "modify_user_address", {"user_id": pending["user_id"], **address})
    assert data["users"][pending["user_id"]]["address"] == address


def test_modify_items_errors(data):
    order = first_order(data, "pending", lambda o, u: len(o["items"]) >= 2)
    item = order["items"][0]
    other_product_item = next(
        v["item_id"]
        for p in data["products"].values()
        if p["product_id"] != item["product_id"]
        for v in p["variants"].values()
        if v["available"]
    )
    pm = order["payment_history"][0]["payment_method_id"]
    tool = "modify_pending_order_items"

    def kw(item_ids, new_item_ids, payment_method_id=pm):
        return {
            "order_id": order["order_id"],
            "item_ids": item_ids,
            "new_item_ids": new_item_ids,
            "payment_method_id": payment_method_id,
        }

    new = other_variant(data, item)["item_id"]
    assert_error(data, tool, kw(["1234567890"], [new]), "Error: 1234567890 not found")
    n_same = sum(i["item_id"] == item["item_id"] for i in order["items"])
    dup = [item["item_id"]] * (n_same + 1)
    assert_error(data, tool, kw(dup, [new] * len(dup)), f"Error: {item['item_id']} not found")
    mismatch = "Error: the number of items to be exchanged should match"
    assert_error(data, tool, kw([item["item_id"]], [new, new]), mismatch)
    foreign = f"Error: new item {other_product_item} not found or available"
    assert_error(data, tool, kw([item["item_id"]], [other_product_item]), foreign)
    unavailable = next(
        (i, v) for i in order["items"] if (v := other_variant(data, i, available=False)) is not None
    )
    assert_error(
        data,
        tool,
        kw([unavailable[0]["item_id"]], [unavailable[1]["item_id"]]),
        f"Error: new item {unavailable[1]['item_id']} not found or available",
    )
    assert_error(data, tool, kw([item["item_id"]], [new], "credit_card_0"), "Error: payment method not found")
    poor_order, poor_item, variant, card = unaffordable_swap(data, "pending")
    assert_error(
        data,
        tool,
        {**kw([poor_item["item_id"]], [variant["item_id"]], card["id"]), "order_id": poor_order["order_id"]},
        "Error: insufficient gift card balance to pay for the new item",
    )
    delivered = first_order(data, "delivered")["order_id"]
    assert_error(data, tool, {**kw([], []), "order_id": delivered}, "Error: non-pending order cannot be modified")


def cheaper_swap(data: dict, order: dict) -> tuple[dict, dict] | None:
    for item in order["items"]:
        for variant in data["products"][item["product_id"]]["variants"].values():
            if variant["available"] and variant["price"] < item["price"]:
                return item, variant
    return None


def test_modify_items_effects_and_only_once(data):
    # A cheaper variant: the difference is refunded to the gift card.
    order = first_order(data, "pending", lambda o, u: gift_cards(u) and cheaper_swap(data, o))
    user = data["users"][order["user_id"]]
    card = gift_cards(user)[0]
    balance = card["balance"]
    item, new = cheaper_swap(data, order)
    old_price = item["price"]
    kwargs = {
        "order_id": order["order_id"],
        "item_ids": [item["item_id"]],
        "new_item_ids": [new["item_id"]],
        "payment_method_id": card["id"],
    }
    assert json.loads(run_tool(data, "modify_pending_order_items", kwargs)) == order
    assert item["item_id"] == new["item_id"] and item["price"] == new["price"] and item["options"] == new["options"]
    diff = new["price"] - old_price  # unrounded, exactly as the benchmark records it
    assert order["payment_history"][-1] == {
        "transaction_type": "refund",
        "amount": abs(diff),
        "payment_method_id": card["id"],
    }
    assert card["balance"] == round(balance - diff, 2)
    assert order["status"] == "pending (item modified)"
    assert_error(data, "modify_pending_order_items", kwargs, "Error: non-pending order cannot be modified")
    assert_error(
        data,
        "cancel_pending_order",
        {"order_id": order["order_id"], "reason": "no longer needed"},
        "Error: non-pending order cannot be cancelled",
    )


def test_modify_items_relooks_up_each_swap():
    """[A, B] -> [B, C] on an order holding [A, B]: the benchmark swaps A to B, then finds
    the *first* B - the line it just changed - and swaps that to C."""

    def variant(item_id: str, price: float) -> dict:
        return {"item_id": item_id, "options": {"v": item_id}, "available": True, "price": price}

    def line(v: dict) -> dict:
        return {"name": "P", "product_id": "p", "item_id": v["item_id"], "price": v["price"], "options": v["options"]}

    variants = {v["item_id"]: v for v in (variant("A", 10.0), variant("B", 20.1), variant("C", 30.2))}
    card = {"source": "gift_card", "id": "gift_card_1", "balance": 100}
    data = {
        "products": {"p": {"name": "P", "product_id": "p", "variants": variants}},
        "users": {"u": {"payment_methods": {"gift_card_1": card}}},
        "orders": {
            "#W1": {
                "order_id": "#W1",
                "user_id": "u",
                "status": "pending",
                "items": [line(variants["A"]), line(variants["B"])],
                "payment_history": [
                    {"transaction_type": "payment", "amount": 30.1, "payment_method_id": "gift_card_1"}
                ],
            }
        },
    }
    kwargs = {"order_id": "#W1", "item_ids": ["A", "B"], "new_item_ids": ["B", "C"], "payment_method_id": "gift_card_1"}
    run_tool(data, "modify_pending_order_items", kwargs)
    order = data["orders"]["#W1"]
    assert [i["item_id"] for i in order["items"]] == ["C", "B"]
    diff = (20.1 - 10.0) + (30.2 - 20.1)
    assert order["payment_history"][-1] == {
        "transaction_type": "payment",
        "amount": diff,  # not rounded: the benchmark records the raw float sum
        "payment_method_id": "gift_card_1",
    }
    assert card["balance"] == round(100 - diff, 2)


# ---------------------------------------------------------------- modify payment


def test_modify_payment_errors_and_effects(data):
    tool = "modify_pending_order_payment"
    order = first_order(
        data,
        "pending",
        lambda o, u: "gift_card" in o["payment_history"][0]["payment_method_id"]
        and any(m["source"] != "gift_card" for m in u["payment_methods"].values()),
    )
    user = data["users"][order["user_id"]]
    old_id = order["payment_history"][0]["payment_method_id"]
    amount = order["payment_history"][0]["amount"]
    unknown = {"order_id": order["order_id"], "payment_method_id": "paypal_0"}
    assert_error(data, tool, unknown, "Error: payment method not found")
    assert_error(
        data,
        tool,
        {"order_id": order["order_id"], "payment_method_id": old_id},
        "Error: the new payment method should be different from the current one",
    )
    low = first_order(
        data,
        "pending",
        lambda o, u: any(
            g["balance"] < o["payment_history"][0]["amount"]
            and g["id"] != o["payment_history"][0]["payment_method_id"]
            for g in gift_cards(u)
        ),
    )
    low_card = next(
        g["id"]
        for g in gift_cards(data["users"][low["user_id"]])
        if g["balance"] < low["payment_history"][0]["amount"]
    )
    assert_error(
        data,
        tool,
        {"order_id": low["order_id"], "payment_method_id": low_card},
        "Error: insufficient gift card balance to pay for the order",
    )

    new_id = next(k for k, m in user["payment_methods"].items() if m["source"] != "gift_card")
    old_balance = user["payment_methods"][old_id]["balance"]
    run_tool(data, tool, {"order_id": order["order_id"], "payment_method_id": new_id})
    assert order["payment_history"][1:] == [
        {"transaction_type": "payment", "amount": amount, "payment_method_id": new_id},
        {"transaction_type": "refund", "amount": amount, "payment_method_id": old_id},
    ]
    assert order["status"] == "pending"
    assert user["payment_methods"][old_id]["balance"] == round(old_balance + amount, 2)
    assert_error(
        data,
        tool,
        {"order_id": order["order_id"], "payment_method_id": old_id},
        "Error: there should be exactly one payment for a pending order",
    )


# ---------------------------------------------------------------- return & exchange


def delivered_with_choices(data: dict) -> dict:
    return first_order(
        data,
        "delivered",
        lambda o, u: len(o["items"]) >= 2
        and gift_cards(u)
        and "gift_card" not in o["payment_history"][0]["payment_method_id"]
        and any(
            k != o["payment_history"][0]["payment_method_id"] and "gift_card" not in k for k in u["payment_methods"]
        ),
    )


def test_return_errors_and_effects(data):
    tool = "return_delivered_order_items"
    order = delivered_with_choices(data)
    user = data["users"][order["user_id"]]
    original = order["payment_history"][0]["payment_method_id"]
    other = next(k for k in user["payment_methods"] if k != original and "gift_card" not in k)
    ids = [i["item_id"] for i in order["items"]]
    pending = first_order(data, "pending")
    assert_error(
        data,
        tool,
        {"order_id": pending["order_id"], "item_ids": [], "payment_method_id": original},
        "Error: non-delivered order cannot be returned",
    )
    base = {"order_id": order["order_id"], "item_ids": ids}
    assert_error(data, tool, {**base, "payment_method_id": "gift_card_0"}, "Error: payment method not found")
    assert_error(
        data,
        tool,
        {**base, "payment_method_id": other},
        "Error: payment method should be either the original payment method or a gift card",
    )
    assert_error(
        data,
        tool,
        {**base, "item_ids": ids + ["1234567890"], "payment_method_id": original},
        "Error: some item not found",
    )
    card = gift_cards(user)[0]
    balance = card["balance"]
    run_tool(data, tool, {**base, "item_ids": ids[::-1], "payment_method_id": card["id"]})
    assert order["status"] == "return requested"
    assert order["return_items"] == sorted(ids)
    assert order["return_payment_method_id"] == card["id"]
    assert card["balance"] == balance  # refunds happen when the items come back
    assert_error(data, tool, {**base, "payment_method_id": original}, "Error: non-delivered order cannot be returned")


def test_exchange_errors_and_effects(data):
    tool = "exchange_delivered_order_items"
    order = delivered_with_choices(data)
    user = data["users"][order["user_id"]]
    original = order["payment_history"][0]["payment_method_id"]
    item = next(i for i in order["items"] if other_variant(data, i) is not None)
    new = other_variant(data, item)

    def kw(item_ids, new_item_ids, payment_method_id=original):
        return {
            "order_id": order["order_id"],
            "item_ids": item_ids,
            "new_item_ids": new_item_ids,
            "payment_method_id": payment_method_id,
        }

    assert_error(
        data,
        tool,
        {**kw([], []), "order_id": first_order(data, "processed")["order_id"]},
        "Error: non-delivered order cannot be exchanged",
    )
    assert_error(data, tool, kw(["1234567890"], [new["item_id"]]), "Error: 1234567890 not found")
    assert_error(data, tool, kw([item["item_id"]], []), "Error: the number of items to be exchanged should match")
    foreign = next(
        v["item_id"]
        for p in data["products"].values()
        if p["product_id"] != item["product_id"]
        for v in p["variants"].values()
    )
    assert_error(data, tool, kw([item["item_id"]], [foreign]), f"Error: new item {foreign} not found or available")
    assert_error(data, tool, kw([item["item_id"]], [new["item_id"]], "paypal_0"), "Error: payment method not found")
    poor_order, poor_item, variant, poor_card = unaffordable_swap(data, "delivered")
    assert_error(
        data,
        tool,
        {**kw([poor_item["item_id"]], [variant["item_id"]], poor_card["id"]), "order_id": poor_order["order_id"]},
        "Error: insufficient gift card balance to pay for the price difference",
    )
    card = gift_cards(user)[0]
    balance = card["balance"]
    run_tool(data, tool, kw([item["item_id"]], [new["item_id"]], original))
    assert order["status"] == "exchange requested"
    assert order["exchange_items"] == [item["item_id"]]
    assert order["exchange_new_items"] == [new["item_id"]]
    assert order["exchange_payment_method_id"] == original
    assert order["exchange_price_difference"] == round(new["price"] - item["price"], 2)
    assert item["item_id"] != new["item_id"]  # the order's items stay as delivered
    assert card["balance"] == balance
    again = kw([item["item_id"]], [new["item_id"]])
    assert_error(data, tool, again, "Error: non-delivered order cannot be exchanged")
