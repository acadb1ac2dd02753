"""Conversation states built from the real τ-bench data, through the same transitions
the workflow uses (no hand-written facts)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from workflows.domain import transitions as tr
from workflows.domain.actions import make_tool_call
from workflows.domain.state import ConversationState

DATA = Path(__file__).resolve().parent.parent / "systems" / "retail" / "data"
CUSTOMER = "raj_sanchez_2970"
EMAIL = "raj.sanchez2046@example.com"
PENDING = "#W4566809"
DELIVERED = "#W7736708"
DELIVERED_2 = "#W1067251"
CARD = "credit_card_3362387"
GIFT = "gift_card_2259499"  # balance 30


@lru_cache
def data() -> dict:
    return {name: json.loads((DATA / f"{name}.json").read_text()) for name in ("users", "orders", "products")}


def read(state: ConversationState, name: str, **args) -> str:
    """Fold the benchmark's result for a read into the state, like the workflow does."""
    d = data()
    if name == "find_user_id_by_email":
        result = next(uid for uid, u in d["users"].items() if u["email"] == args["email"])
    elif name == "find_user_id_by_name_zip":
        result = next(uid for uid, u in d["users"].items() if u["name"] == {
            "first_name": args["first_name"], "last_name": args["last_name"]} and u["address"]["zip"] == args["zip"])
    elif name == "get_user_details":
        result = json.dumps(d["users"][args["user_id"]])
    elif name == "get_order_details":
        result = json.dumps(d["orders"][args["order_id"]])
    elif name == "get_product_details":
        result = json.dumps(d["products"][args["product_id"]])
    else:
        raise ValueError(name)
    return tr.apply_read_result(state, make_tool_call(name, args), result)


def fresh() -> ConversationState:
    state = ConversationState(conversation_id="policy-test")
    tr.receive_user_message(state, f"Hi, my email is {EMAIL}")
    return state


def authenticated(load_orders: bool = True) -> ConversationState:
    state = fresh()
    read(state, "find_user_id_by_email", email=EMAIL)
    read(state, "get_user_details", user_id=CUSTOMER)
    if load_orders:
        for order_id in (PENDING, DELIVERED, DELIVERED_2):
            read(state, "get_order_details", order_id=order_id)
            for item in data()["orders"][order_id]["items"]:
                read(state, "get_product_details", product_id=item["product_id"])
    return state


def other_customer_order() -> tuple[str, str]:
    """(order_id, user_id) of an order that is not the test customer's."""
    for order_id, order in data()["orders"].items():
        if order["user_id"] != CUSTOMER and order["status"] == "pending":
            return order_id, order["user_id"]
    raise AssertionError("no other order")


def other_variant(order_id: str, index: int = 0, available: bool = True) -> tuple[str, str]:
    """(old item id, new item id): a different variant of the same product, by availability."""
    item = data()["orders"][order_id]["items"][index]
    product = data()["products"][item["product_id"]]
    for variant_id, variant in product["variants"].items():
        if variant_id != item["item_id"] and variant["available"] == available:
            return item["item_id"], variant_id
    raise AssertionError("no such variant")
