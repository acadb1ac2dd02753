"""The policy validator: pure functions that accept or reject a proposal given the state.

Every rejection names the policy clause it enforces (``Rule``, whose values are the
clause ids of ``workflows.policy_text.POLICY_CLAUSES``). The workflow calls
``validate_proposal`` when the model proposes an action and ``validate_execution``
right before a consequential write runs, with the user's confirmation.
"""

from __future__ import annotations

from collections import Counter
from enum import Enum
from typing import Any, Optional

from pydantic import BaseModel

from workflows.actions import CANCEL_REASONS, ToolClass, call_arguments, call_digest, tool_class
from workflows.facts import extract_facts
from workflows.state import Confirmation, ConversationState, OrderFact, PendingConfirmation, Role


class Rule(str, Enum):
    """Why a proposal was rejected: a policy clause id, or a protocol problem."""

    AUTHENTICATE_FIRST = "authenticate-first"
    ONE_CUSTOMER = "one-customer"
    EXPLICIT_CONFIRMATION = "explicit-confirmation"
    CHECK_STATUS = "check-status"
    CANCEL_PENDING_ONLY = "cancel-pending-only"
    MODIFY_PENDING_ONLY = "modify-pending-only"
    MODIFY_PAYMENT = "modify-payment"
    ITEM_CHANGE_ONCE = "item-change-once"
    SAME_PRODUCT_VARIANT = "same-product-variant"
    PRICE_DIFFERENCE_PAYMENT = "price-difference-payment"
    RETURN_DELIVERED_ONLY = "return-delivered-only"
    EXCHANGE_DELIVERED_ONLY = "exchange-delivered-only"
    CONVERSATION_CLOSED = "conversation-closed"
    MALFORMED_OUTPUT = "malformed-model-output"
    TOOL_ERROR = "tool-error"
    USER_DECLINED = "user-declined"


class Verdict(BaseModel):
    """Outcome of validation. ``rule`` and ``reason`` are set when rejected;
    ``needs_confirmation`` when the action is a write that must be confirmed first."""

    accepted: bool
    rule: Optional[Rule] = None
    reason: str = ""
    needs_confirmation: bool = False


class PolicyViolation(Exception):
    """Internal: carries the rule and reason of the first failed check."""

    def __init__(self, rule: Rule, reason: str) -> None:
        super().__init__(reason)
        self.rule = rule
        self.reason = reason


def _require(condition: bool, rule: Rule, reason: str) -> None:
    if not condition:
        raise PolicyViolation(rule, reason)


ACCEPT = Verdict(accepted=True)


def validate_proposal(state: ConversationState, action: Any) -> Verdict:
    """Check a ``ProposedAction`` against the policy and the state.

    Returns an accepted verdict (``needs_confirmation`` for consequential writes) or a
    rejection with the rule. Never raises for a well-typed action.
    """
    if not state.is_open():
        return Verdict(accepted=False, rule=Rule.CONVERSATION_CLOSED, reason="the conversation is closed")
    if action.kind != "tool_call":
        return ACCEPT
    try:
        _check_call(state, action.tool)
    except PolicyViolation as violation:
        return Verdict(accepted=False, rule=violation.rule, reason=violation.reason)
    needs_confirmation = tool_class(action.tool.name) != ToolClass.READ
    return Verdict(accepted=True, needs_confirmation=needs_confirmation)


def validate_execution(
    state: ConversationState, pending: Optional[PendingConfirmation], confirmation: Optional[Confirmation]
) -> Verdict:
    """Check that a pending write may run now: the user said yes to this exact detail,
    after it was shown, and every precondition still holds on the current state.

    Clause: explicit-confirmation (plus all the write's own clauses, re-checked).
    """
    if pending is None:
        return Verdict(accepted=False, rule=Rule.EXPLICIT_CONFIRMATION, reason="nothing is awaiting confirmation")
    if confirmation is None:
        return Verdict(
            accepted=False,
            rule=Rule.EXPLICIT_CONFIRMATION,
            reason="a consequential write needs the user's explicit yes to its exact detail",
        )
    if confirmation.digest != pending.digest or confirmation.digest != call_digest(pending.call):
        return Verdict(
            accepted=False,
            rule=Rule.EXPLICIT_CONFIRMATION,
            reason="the user confirmed a different action detail than the one proposed",
        )
    if confirmation.operation_id != pending.operation_id:
        return Verdict(
            accepted=False,
            rule=Rule.EXPLICIT_CONFIRMATION,
            reason="the user's yes was sent before this proposal was shown (it answered an earlier one)",
        )
    if confirmation.turn <= pending.proposed_turn:
        return Verdict(
            accepted=False,
            rule=Rule.EXPLICIT_CONFIRMATION,
            reason="the confirmation must come in a user turn after the detail was shown",
        )
    if not state.is_open():
        return Verdict(accepted=False, rule=Rule.CONVERSATION_CLOSED, reason="the conversation is closed")
    try:
        _check_call(state, pending.call)
    except PolicyViolation as violation:
        return Verdict(accepted=False, rule=violation.rule, reason=violation.reason)
    return Verdict(accepted=True)


# --- per-tool checks -------------------------------------------------------------


def _check_call(state: ConversationState, call: Any) -> None:
    name = call.name
    args = call_arguments(call)
    if name in ("calculate", "think"):
        return
    customer = state.customer
    if name in ("find_user_id_by_email", "find_user_id_by_name_zip"):
        if customer is not None:
            _require(_same_identity(state, name, args), Rule.ONE_CUSTOMER,
                     f"the conversation already serves {customer.user_id}; another identity cannot be looked up")
        _require(_stated_by_user(state, name, args), Rule.AUTHENTICATE_FIRST,
                 "authenticate with the email, or the name and zip code, the user stated themselves")
        return
    _require(customer is not None, Rule.AUTHENTICATE_FIRST,
             "authenticate the user by email or by name and zip code first (even if they gave a user id)")
    assert customer is not None
    if "user_id" in args:
        _require(args["user_id"] == customer.user_id, Rule.ONE_CUSTOMER,
                 f"user {args['user_id']} is not the authenticated customer {customer.user_id}")
    if name in ("get_user_details", "get_product_details", "list_all_product_types", "modify_user_address"):
        return
    order_id = args["order_id"]
    if customer.details_loaded:
        _require(order_id in customer.order_ids, Rule.ONE_CUSTOMER,
                 f"order {order_id} does not belong to the authenticated customer {customer.user_id}")
    if name == "get_order_details":
        return
    order = state.orders.get(order_id)
    _require(order is not None, Rule.CHECK_STATUS,
             f"read order {order_id} from the system of record before acting on it")
    assert order is not None
    _require(order.user_id == customer.user_id, Rule.ONE_CUSTOMER,
             f"order {order_id} belongs to another customer")
    if "payment_method_id" in args:
        _require(args["payment_method_id"] in customer.payment_methods, Rule.ONE_CUSTOMER,
                 f"payment method {args['payment_method_id']} is not one of the customer's payment methods")
    WRITE_CHECKS[name](state, order, args)


def _stated_by_user(state: ConversationState, name: str, args: dict[str, Any]) -> bool:
    """The lookup uses identity facts from the user's own words (pinned, or in a recent
    user turn; never an assistant turn), so the model cannot pick an identity for them."""
    facts = list(state.pinned_facts)
    for turn in state.recent_turns:
        if turn.role == Role.USER:
            facts += extract_facts(turn.text, turn.turn)
    pinned = {(f.kind, f.value.lower()) for f in facts}
    if name == "find_user_id_by_email":
        return ("email", args["email"].lower()) in pinned
    full_name = f"{args['first_name']} {args['last_name']}".lower()
    return ("name", full_name) in pinned and ("zip", args["zip"].lower()) in pinned


def _same_identity(state: ConversationState, name: str, args: dict[str, Any]) -> bool:
    customer = state.customer
    assert customer is not None
    if name == "find_user_id_by_email":
        return bool(customer.email) and args["email"].lower() == customer.email.lower()
    return (
        args["first_name"].lower() == customer.first_name.lower()
        and args["last_name"].lower() == customer.last_name.lower()
        and args["zip"] == customer.zip
    )


REQUIRED_STATUS: dict[str, tuple[str, Rule, str]] = {
    "cancel_pending_order": ("pending", Rule.CANCEL_PENDING_ONLY, "cancelled"),
    "modify_pending_order_address": ("pending", Rule.MODIFY_PENDING_ONLY, "modified"),
    "modify_pending_order_payment": ("pending", Rule.MODIFY_PENDING_ONLY, "modified"),
    "modify_pending_order_items": ("pending", Rule.MODIFY_PENDING_ONLY, "modified"),
    "return_delivered_order_items": ("delivered", Rule.RETURN_DELIVERED_ONLY, "returned"),
    "exchange_delivered_order_items": ("delivered", Rule.EXCHANGE_DELIVERED_ONLY, "exchanged"),
}
"""Status precondition of each order write: (required status, clause, verb)."""


def order_precondition(tool: str, order_id: str, status: str, payment_count: int) -> Optional[tuple[Rule, str]]:
    """The order-state preconditions of a write, shared by the proposal check and by
    ``RefundWorkflow``'s fresh read: ``None`` when they hold, else ``(rule, reason)``."""
    required, rule, verb = REQUIRED_STATUS[tool]
    if status != required:
        return rule, f"order {order_id} is '{status}'; only {required} orders can be {verb}"
    if tool == "cancel_pending_order" and payment_count != 1:
        # The system of record refunds every payment_history entry on cancel: after a payment
        # change that would refund more than was paid, so such an order goes to a human.
        return rule, (f"order {order_id} has {payment_count} payment transactions (its payment was changed); "
                      "cancelling it here would refund more than was paid: transfer to a human agent")
    return None


def _require_precondition(tool: str, order: OrderFact) -> None:
    failed = order_precondition(tool, order.order_id, order.status, len(order.payment_history))
    if failed is not None:
        raise PolicyViolation(*failed)


def _check_cancel(state: ConversationState, order: OrderFact, args: dict[str, Any]) -> None:
    _require(args["reason"] in CANCEL_REASONS, Rule.CANCEL_PENDING_ONLY,
             f"cancel reason must be one of {list(CANCEL_REASONS)}, not '{args['reason']}'")
    _require_precondition("cancel_pending_order", order)


def _check_modify_address(state: ConversationState, order: OrderFact, args: dict[str, Any]) -> None:
    _require_precondition("modify_pending_order_address", order)


def _check_modify_payment(state: ConversationState, order: OrderFact, args: dict[str, Any]) -> None:
    _require_precondition("modify_pending_order_payment", order)
    method_id = args["payment_method_id"]
    _require(len(order.payment_history) == 1, Rule.MODIFY_PAYMENT,
             "a pending order must have exactly one payment to change its payment method")
    paid = order.payment_history[0]
    _require(method_id != paid.payment_method_id, Rule.MODIFY_PAYMENT,
             f"{method_id} is already the order's payment method; choose a different one")
    _require_gift_card_covers(state, method_id, paid.amount, Rule.MODIFY_PAYMENT, "the order total")


def _check_item_change(state: ConversationState, order: OrderFact, args: dict[str, Any], tool: str) -> None:
    _require(not any(op.tool == tool and op.ok for op in state.operations_on(order.order_id)),
             Rule.ITEM_CHANGE_ONCE, f"{tool} was already done once for order {order.order_id}")
    item_ids, new_item_ids = args["item_ids"], args["new_item_ids"]
    _require(len(item_ids) == len(new_item_ids), Rule.SAME_PRODUCT_VARIANT,
             "each item to change needs exactly one new item in the same position")
    _require_items_in_order(order, item_ids, Rule.SAME_PRODUCT_VARIANT)
    for old_id, new_id in zip(item_ids, new_item_ids):
        old = next(item for item in order.items if item.item_id == old_id)
        product = state.products.get(old.product_id)
        _require(product is not None, Rule.SAME_PRODUCT_VARIANT,
                 f"read product {old.product_id} ({old.name}) before choosing its variants")
        assert product is not None
        variant = product.variants.get(new_id)
        _require(variant is not None, Rule.SAME_PRODUCT_VARIANT,
                 f"item {new_id} is not a variant of {old.name} (product {old.product_id})")
        assert variant is not None
        # The same variant is allowed: a like-for-like replacement within an item change.
        _require(variant.available, Rule.SAME_PRODUCT_VARIANT, f"item {new_id} is not available")
    difference = item_change_difference(state, order, item_ids, new_item_ids)
    _require_gift_card_covers(state, args["payment_method_id"], difference,
                              Rule.PRICE_DIFFERENCE_PAYMENT, "the price difference")


def _check_modify_items(state: ConversationState, order: OrderFact, args: dict[str, Any]) -> None:
    if order.status == "pending (item modified)":
        raise PolicyViolation(Rule.ITEM_CHANGE_ONCE, f"items of order {order.order_id} were already modified once")
    _require_precondition("modify_pending_order_items", order)
    _check_item_change(state, order, args, "modify_pending_order_items")


def _check_exchange(state: ConversationState, order: OrderFact, args: dict[str, Any]) -> None:
    if order.status == "exchange requested":
        raise PolicyViolation(Rule.ITEM_CHANGE_ONCE, f"order {order.order_id} was already exchanged once")
    _require_precondition("exchange_delivered_order_items", order)
    _check_item_change(state, order, args, "exchange_delivered_order_items")


def _check_return(state: ConversationState, order: OrderFact, args: dict[str, Any]) -> None:
    _require_precondition("return_delivered_order_items", order)
    _require_items_in_order(order, args["item_ids"], Rule.RETURN_DELIVERED_ONLY)
    method_id = args["payment_method_id"]
    assert state.customer is not None
    method = state.customer.payment_methods[method_id]
    original = order.payment_method_ids[0] if order.payment_method_ids else None
    _require(method_id == original or method.source == "gift_card", Rule.RETURN_DELIVERED_ONLY,
             f"a refund goes to the original payment method ({original}) or one of the customer's "
             f"gift cards, not {method_id}")


def item_change_difference(state: ConversationState, order: OrderFact, item_ids: list[str],
                           new_item_ids: list[str]) -> float:
    """New minus old price of an item change, decimal currency rounded to cents; the
    figure the user confirms and the one checked against a gift card. Items or variants
    not in the state count as 0 (the policy rejects such a change before it matters)."""
    by_item = {item.item_id: item for item in order.items}
    difference = 0.0
    for old_id, new_id in zip(item_ids, new_item_ids):
        old = by_item.get(old_id)
        product = state.products.get(old.product_id) if old else None
        variant = product.variants.get(new_id) if product else None
        if old is not None and variant is not None:
            difference += variant.price - old.price
    return round(difference, 2)


def _require_items_in_order(order: OrderFact, item_ids: list[str], rule: Rule) -> None:
    available = Counter(item.item_id for item in order.items)
    for item_id, count in Counter(item_ids).items():
        _require(available[item_id] >= count, rule,
                 f"item {item_id} is not in order {order.order_id}"
                 + (f" {count} times" if available[item_id] else ""))


def _require_gift_card_covers(
    state: ConversationState, method_id: str, amount: float, rule: Rule, what: str
) -> None:
    assert state.customer is not None
    method = state.customer.payment_methods[method_id]
    if method.source != "gift_card" or amount <= 0:
        return
    balance = method.balance or 0.0
    _require(balance >= amount, rule,
             f"gift card {method_id} has {balance:.2f}, not enough to cover {what} of {amount:.2f}")


WRITE_CHECKS = {
    "cancel_pending_order": _check_cancel,
    "modify_pending_order_address": _check_modify_address,
    "modify_pending_order_payment": _check_modify_payment,
    "modify_pending_order_items": _check_modify_items,
    "return_delivered_order_items": _check_return,
    "exchange_delivered_order_items": _check_exchange,
}
