"""The tools' own policy checks (the ``check`` and ``status`` of each spec) and the
figures they share with the confirmation detail.

Each check raises ``PolicyViolation`` naming its clause. The generic gates (scope:
authentication, one customer, the order read first) run before these, in
``workflows.domain.policy.validator``.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Optional

from workflows.domain.catalogue.spec import StatusRequirement
from workflows.domain.policy.clauses import PolicyViolation, Rule, require
from workflows.domain.facts import extract_facts
from workflows.domain.records import OrderFact, Role

if TYPE_CHECKING:
    from workflows.domain.state import ConversationState


def status_refusal(name: str, status: Optional[StatusRequirement], order_id: str, current: str,
                   payment_count: int) -> Optional[tuple[Rule, str]]:
    """The order-state precondition of a write, shared by the proposal check, the
    ``RefundWorkflow``'s fresh read and the system of record's in-transaction guard:
    None when it holds, else ``(rule, reason)``."""
    if status is None:
        return None
    if status.once_status is not None and current == status.once_status:
        return Rule.ITEM_CHANGE_ONCE, f"{name} was already done once for order {order_id}"
    if current != status.status:
        return status.rule, f"order {order_id} is '{current}'; only {status.status} orders can be {status.verb}"
    if status.single_payment and payment_count != 1:
        # The system of record refunds every payment_history entry on cancel: after a payment
        # change that would refund more than was paid, so such an order goes to a human.
        return status.rule, (f"order {order_id} has {payment_count} payment transactions (its payment was "
                             "changed); this would refund more than was paid: transfer to a human agent")
    return None


# --- identity lookups (scope IDENTIFY) ------------------------------------------------


def identity_by_email(state: ConversationState, args: dict[str, Any], order: Optional[OrderFact]) -> None:
    """one-customer: only the serving customer's own email; authenticate-first: an email the user stated."""
    customer = state.customer
    if customer is not None:
        require(bool(customer.email) and args["email"].lower() == customer.email.lower(), Rule.ONE_CUSTOMER,
                "the conversation already serves a customer; another identity cannot be looked up")
    require(("email", args["email"].lower()) in _stated(state), Rule.AUTHENTICATE_FIRST,
            "authenticate with the email, or the name and zip code, the user stated themselves")


def identity_by_name_zip(state: ConversationState, args: dict[str, Any], order: Optional[OrderFact]) -> None:
    """As ``identity_by_email``, for first name, last name and zip code."""
    customer = state.customer
    if customer is not None:
        same = (args["first_name"].lower() == customer.first_name.lower()
                and args["last_name"].lower() == customer.last_name.lower() and args["zip"] == customer.zip)
        require(same, Rule.ONE_CUSTOMER,
                "the conversation already serves a customer; another identity cannot be looked up")
    stated = _stated(state)
    full_name = f"{args['first_name']} {args['last_name']}".lower()
    require(("name", full_name) in stated and ("zip", args["zip"].lower()) in stated, Rule.AUTHENTICATE_FIRST,
            "authenticate with the email, or the name and zip code, the user stated themselves")


def _stated(state: ConversationState) -> set[tuple[str, str]]:
    """Identity facts from the user's own words (pinned, or in a recent user turn; never an
    assistant turn), so the model cannot pick an identity for them."""
    facts = list(state.pinned_facts)
    for turn in state.recent_turns:
        if turn.role == Role.USER:
            facts += extract_facts(turn.text, turn.turn)
    return {(f.kind, f.value.lower()) for f in facts}


# --- order writes (scope ORDER) ---------------------------------------------------------

CANCEL_REASONS = ("no longer needed", "ordered by mistake")
"""The only cancellation reasons (policy clause cancel-pending-only)."""


def cancel_reason(state: ConversationState, args: dict[str, Any], order: Optional[OrderFact]) -> None:
    """cancel-pending-only: the reason is one of ``CANCEL_REASONS``."""
    require(args["reason"] in CANCEL_REASONS, Rule.CANCEL_PENDING_ONLY,
            f"cancel reason must be one of {list(CANCEL_REASONS)}, not '{args['reason']}'")


def payment_change(state: ConversationState, args: dict[str, Any], order: Optional[OrderFact]) -> None:
    """modify-payment: one payment to replace, by a different method; a gift card covers the total."""
    assert order is not None
    method_id = args["payment_method_id"]
    require(len(order.payment_history) == 1, Rule.MODIFY_PAYMENT,
            "a pending order must have exactly one payment to change its payment method")
    paid = order.payment_history[0]
    require(method_id != paid.payment_method_id, Rule.MODIFY_PAYMENT,
            f"{method_id} is already the order's payment method; choose a different one")
    gift_card_covers(state, method_id, paid.amount, Rule.MODIFY_PAYMENT, "the order total")


def item_change(tool: str):
    """item-change-once, same-product-variant, price-difference-payment for ``tool``
    (``modify_pending_order_items`` or ``exchange_delivered_order_items``)."""

    def check(state: ConversationState, args: dict[str, Any], order: Optional[OrderFact]) -> None:
        assert order is not None
        require(not any(op.tool == tool and op.ok for op in state.operations_on(order.order_id)),
                Rule.ITEM_CHANGE_ONCE, f"{tool} was already done once for order {order.order_id}")
        item_ids, new_item_ids = args["item_ids"], args["new_item_ids"]
        require(len(item_ids) == len(new_item_ids), Rule.SAME_PRODUCT_VARIANT,
                "each item to change needs exactly one new item in the same position")
        items_in_order(order, item_ids, Rule.SAME_PRODUCT_VARIANT)
        for old_id, new_id in zip(item_ids, new_item_ids):
            old = next(item for item in order.items if item.item_id == old_id)
            product = state.products.get(old.product_id)
            require(product is not None, Rule.SAME_PRODUCT_VARIANT,
                    f"read product {old.product_id} ({old.name}) before choosing its variants")
            assert product is not None
            variant = product.variants.get(new_id)
            require(variant is not None, Rule.SAME_PRODUCT_VARIANT,
                    f"item {new_id} is not a variant of {old.name} (product {old.product_id})")
            assert variant is not None
            # The same variant is allowed: a like-for-like replacement within an item change.
            require(variant.available, Rule.SAME_PRODUCT_VARIANT, f"item {new_id} is not available")
        difference = item_change_difference(state, order, item_ids, new_item_ids)
        gift_card_covers(state, args["payment_method_id"], difference, Rule.PRICE_DIFFERENCE_PAYMENT,
                         "the price difference")

    return check


def return_items(state: ConversationState, args: dict[str, Any], order: Optional[OrderFact]) -> None:
    """return-delivered-only: items of the order; refund to the original method or a gift card."""
    assert order is not None and state.customer is not None
    items_in_order(order, args["item_ids"], Rule.RETURN_DELIVERED_ONLY)
    method_id = args["payment_method_id"]
    method = state.customer.payment_methods[method_id]
    original = order.payment_method_ids[0] if order.payment_method_ids else None
    require(method_id == original or method.source == "gift_card", Rule.RETURN_DELIVERED_ONLY,
            f"a refund goes to the original payment method ({original}) or one of the customer's "
            f"gift cards, not {method_id}")


def item_change_difference(state: ConversationState, order: OrderFact, item_ids: list[str],
                           new_item_ids: list[str]) -> Decimal:
    """New minus old price of an item change, cent ``Decimal`` currency; the figure the
    user confirms and the one checked against a gift card. Items or variants not in the
    state count as 0 (the policy rejects such a change before it matters)."""
    by_item = {item.item_id: item for item in order.items}
    difference = Decimal("0.00")
    for old_id, new_id in zip(item_ids, new_item_ids):
        old = by_item.get(old_id)
        product = state.products.get(old.product_id) if old else None
        variant = product.variants.get(new_id) if product else None
        if old is not None and variant is not None:
            difference += variant.price - old.price
    return difference  # exact: every price is whole cents


def items_in_order(order: OrderFact, item_ids: list[str], rule: Rule) -> None:
    """Each item id (counted with repeats) is in the order."""
    available = Counter(item.item_id for item in order.items)
    for item_id, count in Counter(item_ids).items():
        require(available[item_id] >= count, rule,
                f"item {item_id} is not in order {order.order_id}"
                + (f" {count} times" if available[item_id] else ""))


def gift_card_covers(state: ConversationState, method_id: str, amount: Decimal, rule: Rule, what: str) -> None:
    """A gift card pays ``amount`` (cent ``Decimal`` currency) only if its balance covers it."""
    assert state.customer is not None
    method = state.customer.payment_methods[method_id]
    if method.source != "gift_card" or amount <= 0:
        return
    balance = method.balance if method.balance is not None else Decimal("0.00")
    if balance < amount:
        raise PolicyViolation(rule, f"gift card {method_id} has {balance:.2f}, not enough to cover {what} "
                                    f"of {amount:.2f}")
