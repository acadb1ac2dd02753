"""How tool results fold into the state: the ``fold`` of each spec.

A retail tool's result is the benchmark's string (JSON text or a plain value); a
fold parses it into typed records so that the model's next snapshot and the policy's
next check reflect the system of record. Folds run only for successful results.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from workflows.domain.catalogue.spec import Fold
from workflows.domain.money import money
from workflows.domain.records import (
    ORDERS_KEPT,
    PRODUCTS_KEPT,
    Customer,
    OrderFact,
    OrderItem,
    PaymentEntry,
    PaymentMethod,
    ProductFact,
    Variant,
)

if TYPE_CHECKING:
    from workflows.domain.state import ConversationState

ANOTHER_CUSTOMER = "Error: order not found"
"""What the model sees of another customer's order: the same as a missing one (one-customer)."""


def found_user(via: str) -> Fold:
    """Fold of an identity lookup: the first user found becomes the conversation's customer
    (``via`` is "email" or "name_zip")."""

    def fold(state: ConversationState, args: dict[str, Any], result: str) -> str:
        if state.customer is None:
            state.customer = Customer(
                user_id=result.strip(), authenticated_via=via, authenticated_turn=state.turn,
                email=args.get("email", ""), first_name=args.get("first_name", ""),
                last_name=args.get("last_name", ""), zip=args.get("zip", ""),
            )
        return result

    return fold


def user(state: ConversationState, args: dict[str, Any], result: str) -> str:
    """Fold a user document (profile, payment methods with balances, order ids) into the
    customer, if it is the authenticated customer's."""
    doc = json.loads(result)
    customer = state.customer
    if customer is None or doc.get("user_id", args.get("user_id")) != customer.user_id:
        return result
    name = doc.get("name", {})
    address = doc.get("address", {})
    customer.first_name = name.get("first_name", customer.first_name)
    customer.last_name = name.get("last_name", customer.last_name)
    customer.email = doc.get("email", customer.email)
    customer.zip = address.get("zip", customer.zip)
    customer.payment_methods = {
        method_id: PaymentMethod(id=method_id, source=method.get("source", ""), balance=method.get("balance"),
                                 display=_display(method))
        for method_id, method in doc.get("payment_methods", {}).items()
    }
    customer.order_ids = list(doc.get("orders", customer.order_ids))
    customer.details_loaded = True
    customer.cut = list(doc.get("cut", []))
    return result


def _display(method: dict[str, Any]) -> str:
    if method.get("source") == "credit_card":
        return f"{method.get('brand', 'card')} ending {method.get('last_four', '????')}"
    if method.get("source") == "gift_card":
        return f"gift card (balance {method.get('balance', 0):.2f})"
    return method.get("source", "")


def order(state: ConversationState, args: dict[str, Any], result: str) -> str:
    """Fold an order document into ``state.orders``; another customer's order is not kept
    and is shown to the model as not found (one-customer)."""
    doc = json.loads(result)
    customer = state.customer
    if customer is None or doc.get("user_id") != customer.user_id:
        return ANOTHER_CUSTOMER
    state.orders[doc["order_id"]] = order_fact(doc, state.turn)
    _keep_newest_orders(state)
    return result


def _keep_newest_orders(state: ConversationState) -> None:
    """Drop the orders first read longest ago past ``ORDERS_KEPT``, never one a shown or
    confirmed write acts on (its checks and detail read it)."""
    if len(state.orders) <= ORDERS_KEPT:
        return
    pending = [state.pending_confirmation] if state.pending_confirmation else []
    held = {getattr(p.call.arguments, "order_id", None) for p in pending + state.awaiting_approval}
    for order_id in [o for o in state.orders if o not in held][: len(state.orders) - ORDERS_KEPT]:
        del state.orders[order_id]


def order_fact(doc: dict[str, Any], read_turn: int = 0) -> OrderFact:
    """The typed order of an order document of the system of record (``get_order_details``),
    read at user turn ``read_turn``; prices and amounts become cent ``Decimal``s. Raises
    ``KeyError`` for a document missing a field."""
    history = [PaymentEntry(**{k: entry[k] for k in ("transaction_type", "amount", "payment_method_id")})
               for entry in doc.get("payment_history", [])]
    items = [OrderItem(item_id=i["item_id"], product_id=i["product_id"], name=i["name"], price=i["price"],
                       options=i.get("options", {})) for i in doc.get("items", [])]
    return OrderFact(
        order_id=doc["order_id"], user_id=doc["user_id"], status=doc["status"], items=items,
        payment_history=history,
        payment_method_ids=[e.payment_method_id for e in history if e.transaction_type == "payment"],
        total=money(sum((i.price for i in items), Decimal(0))), read_turn=read_turn, cut=doc.get("cut", []),
    )


def product(state: ConversationState, args: dict[str, Any], result: str) -> str:
    """Fold a product document (its variants) into ``state.products``."""
    doc = json.loads(result)
    state.products.pop(doc["product_id"], None)  # re-read moves it to the end of the prompt's window
    state.products[doc["product_id"]] = ProductFact(
        product_id=doc["product_id"], name=doc.get("name", ""),
        variants={item_id: Variant(item_id=item_id, options=v.get("options", {}), available=v["available"],
                                   price=v["price"])
                  for item_id, v in doc.get("variants", {}).items()},
        cut=doc.get("cut", []),
    )
    while len(state.products) > PRODUCTS_KEPT:
        del state.products[next(iter(state.products))]
    return result
