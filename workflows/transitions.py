"""Pure state transitions: how user messages and tool results change the state.

The workflow calls these; they never do I/O. Tool results are the benchmark's
strings (JSON text, a plain value, or ``"Error: ..."``) and are parsed here into
typed facts, so the model's next snapshot reflects the system of record.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from workflows.actions import call_arguments
from workflows.facts import extract_facts, merge_facts
from workflows.state import (
    OBSERVATIONS_KEPT,
    RECENT_TURNS_KEPT,
    REJECTIONS_KEPT,
    STEPS_KEPT,
    CompletedOperation,
    ConversationState,
    Customer,
    Observation,
    OrderFact,
    OrderItem,
    PaymentEntry,
    PaymentMethod,
    ProductFact,
    Rejection,
    Role,
    Step,
    StepStatus,
    Turn,
    Variant,
)

ANOTHER_CUSTOMER = "Error: this order belongs to another customer and cannot be shown (one-customer)"


def is_error(result: str) -> bool:
    """A benchmark tool signals failure with a result starting with ``Error``."""
    return result.startswith("Error")


def add_turn(state: ConversationState, role: Role, text: str) -> None:
    """Append a turn to the bounded window (older turns drop; pinned facts stay)."""
    state.recent_turns.append(Turn(turn=state.turn, role=role, text=text))
    del state.recent_turns[:-RECENT_TURNS_KEPT]


def receive_user_message(state: ConversationState, text: str) -> None:
    """Start a new user turn: count it, keep it in the window, pin its facts."""
    state.turn += 1
    add_turn(state, Role.USER, text)
    state.pinned_facts = merge_facts(state.pinned_facts, extract_facts(text, state.turn))


def reject(state: ConversationState, rule: str, reason: str, proposal: Optional[dict[str, Any]] = None) -> Rejection:
    """Record a refused proposal with its rule and reason (kept for audit and for the model)."""
    rejection = Rejection(turn=state.turn, rule=rule, reason=reason, proposal=proposal)
    state.rejections.append(rejection)
    del state.rejections[:-REJECTIONS_KEPT]
    return rejection


def start_step(state: ConversationState, step_id: str, name: str, detail: str,
               operation_id: Optional[str] = None) -> Step:
    """Add a pending business step (e.g. a write awaiting confirmation) at the current turn."""
    step = Step(step_id=step_id, name=name, status=StepStatus.PENDING, turn=state.turn,
                operation_id=operation_id, detail=detail)
    state.steps.append(step)
    if len(state.steps) > STEPS_KEPT:
        # drop the oldest finished steps; pending and running ones always stay
        finished = [s for s in state.steps if s.status not in (StepStatus.PENDING, StepStatus.RUNNING)]
        dropped = {id(s) for s in finished[: len(state.steps) - STEPS_KEPT]}
        state.steps = [s for s in state.steps if id(s) not in dropped]
    return step


def finish_step(state: ConversationState, step_id: str, status: StepStatus, error: Optional[str] = None) -> None:
    """Move step ``step_id`` to ``status`` (running, done, failed, cancelled), with the error if any."""
    for step in state.steps:
        if step.step_id == step_id:
            step.status = status
            step.error = error


def apply_read_result(state: ConversationState, call: Any, result: str) -> str:
    """Fold a read tool's result into the state; returns the result as the model may
    see it (another customer's order is withheld: policy one-customer)."""
    args = call_arguments(call)
    shown = result
    if not is_error(result):
        shown = _FOLDERS.get(call.name, _ignore)(state, args, result)
    state.observations.append(Observation(tool=call.name, arguments=args, result=shown, turn=state.turn))
    del state.observations[:-OBSERVATIONS_KEPT]
    return shown


def apply_write_result(state: ConversationState, call: Any, operation_id: str, key: str,
                       result: str, ok: bool, child_workflow_id: Optional[str] = None) -> None:
    """Record a write that reached the system of record and refresh the facts it returns."""
    args = call_arguments(call)
    state.completed_operations.append(
        CompletedOperation(operation_id=operation_id, idempotency_key=key, tool=call.name,
                           arguments=args, result=result, ok=ok, turn=state.turn,
                           child_workflow_id=child_workflow_id)
    )
    if not ok:
        return
    if call.name == "modify_user_address":
        _fold_user(state, args, result)
    else:
        _fold_order(state, args, result)


def _ignore(state: ConversationState, args: dict[str, Any], result: str) -> str:
    return result


def _fold_found_user(via: str):
    def fold(state: ConversationState, args: dict[str, Any], result: str) -> str:
        if state.customer is None:
            state.customer = Customer(
                user_id=result.strip(), authenticated_via=via, authenticated_turn=state.turn,
                email=args.get("email", ""), first_name=args.get("first_name", ""),
                last_name=args.get("last_name", ""), zip=args.get("zip", ""),
            )
        return result
    return fold


def _fold_user(state: ConversationState, args: dict[str, Any], result: str) -> str:
    user = json.loads(result)
    customer = state.customer
    if customer is None or user.get("user_id", args.get("user_id")) != customer.user_id:
        return result
    name = user.get("name", {})
    address = user.get("address", {})
    customer.first_name = name.get("first_name", customer.first_name)
    customer.last_name = name.get("last_name", customer.last_name)
    customer.email = user.get("email", customer.email)
    customer.zip = address.get("zip", customer.zip)
    customer.payment_methods = {
        method_id: PaymentMethod(id=method_id, source=method.get("source", ""), balance=method.get("balance"),
                                 display=_display(method))
        for method_id, method in user.get("payment_methods", {}).items()
    }
    customer.order_ids = list(user.get("orders", customer.order_ids))
    customer.details_loaded = True
    return result


def _display(method: dict[str, Any]) -> str:
    if method.get("source") == "credit_card":
        return f"{method.get('brand', 'card')} ending {method.get('last_four', '????')}"
    if method.get("source") == "gift_card":
        return f"gift card (balance {method.get('balance', 0):.2f})"
    return method.get("source", "")


def _fold_order(state: ConversationState, args: dict[str, Any], result: str) -> str:
    order = json.loads(result)
    customer = state.customer
    if customer is None or order.get("user_id") != customer.user_id:
        return ANOTHER_CUSTOMER
    history = [PaymentEntry(**{k: entry[k] for k in ("transaction_type", "amount", "payment_method_id")})
               for entry in order.get("payment_history", [])]
    items = [OrderItem(item_id=i["item_id"], product_id=i["product_id"], name=i["name"], price=i["price"],
                       options=i.get("options", {})) for i in order.get("items", [])]
    state.orders[order["order_id"]] = OrderFact(
        order_id=order["order_id"], user_id=order["user_id"], status=order["status"], items=items,
        payment_history=history,
        payment_method_ids=[e.payment_method_id for e in history if e.transaction_type == "payment"],
        total=round(sum(i.price for i in items), 2), read_turn=state.turn,
    )
    return result


def _fold_product(state: ConversationState, args: dict[str, Any], result: str) -> str:
    product = json.loads(result)
    state.products.pop(product["product_id"], None)  # re-read moves it to the end of the prompt's window
    state.products[product["product_id"]] = ProductFact(
        product_id=product["product_id"], name=product.get("name", ""),
        variants={item_id: Variant(item_id=item_id, options=v.get("options", {}), available=v["available"],
                                   price=v["price"])
                  for item_id, v in product.get("variants", {}).items()},
    )
    return result


_FOLDERS = {
    "find_user_id_by_email": _fold_found_user("email"),
    "find_user_id_by_name_zip": _fold_found_user("name_zip"),
    "get_user_details": _fold_user,
    "get_order_details": _fold_order,
    "get_product_details": _fold_product,
}
