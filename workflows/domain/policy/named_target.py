"""The named-target clause: a write acts on the order and items the user's message names.

The message that led to a write proposal is the current turn's user message; when that
message is a yes (it confirmed something else), the message before it. When it names order
ids, a write on another order is refused; when it names item ids of the order the write
acts on, a write on other items of that order is refused. A message that names none
leaves the choice to the conversation so far (the check does not apply). New variants
(``new_item_ids``) are what the user asks for, not what they name as theirs, so they are
not checked here (same-product-variant judges them).
"""

from __future__ import annotations

from typing import Any, Optional

from workflows.domain.actions import call_arguments
from workflows.domain.facts import stated_in
from workflows.domain.policy.clauses import PolicyViolation, Rule
from workflows.domain.policy.confirm import is_yes
from workflows.domain.state import ConversationState


def asking_message(state: ConversationState) -> Optional[str]:
    """The user message that led to a proposal made now (see the module docstring), or None."""
    text = state.user_message(state.turn)
    if text is not None and is_yes(text):
        return state.user_message(state.turn - 1)
    return text


def check_named_target(state: ConversationState, call: Any) -> None:
    """Raise ``PolicyViolation(Rule.NAMED_TARGET)`` when the write ``call`` acts on an order or
    items other than those the asking message names (clause named-target)."""
    text = asking_message(state)
    if not text:
        return
    args = call_arguments(call)
    order_id = args.get("order_id")
    named_orders = stated_in(text, "order_id")
    if order_id and named_orders and order_id not in named_orders:
        raise PolicyViolation(Rule.NAMED_TARGET, (
            f"the user's message names {', '.join(named_orders)}, not {order_id}: propose the change for the "
            "order the user named, or ask which order they mean"))
    item_ids = args.get("item_ids")
    order = state.orders.get(order_id) if order_id else None
    if not item_ids or order is None:
        return
    own = {item.item_id for item in order.items}
    named_items = [item for item in stated_in(text, "item_id") if item in own]
    stray = [item for item in item_ids if item not in named_items]
    if named_items and stray:
        raise PolicyViolation(Rule.NAMED_TARGET, (
            f"the user's message names item(s) {', '.join(named_items)} of order {order_id}, not "
            f"{', '.join(stray)}: propose the change for the items the user named, or ask"))
