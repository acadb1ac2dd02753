"""The named-target clause: a write acts on the order and items the user's message names.

The message that led to a write proposal is the current turn's user message; when that
message is a yes (it confirmed something else), the message before it. When it names order
ids (every one it holds, in any case and digits of any script), a write on another order is
refused, and so is a write when all it holds is something shaped like an order id that is not
one; when it names item ids of the order the write
acts on, a write on other items of that order is refused. A message that names none
leaves the choice to the conversation so far (the check does not apply). New variants
(``new_item_ids``) are what the user asks for, not what they name as theirs, so they are
not checked here (same-product-variant judges them).
"""

from __future__ import annotations

import re
import unicodedata
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


_ORDER_LIKE = re.compile(r"#? ?[Ww] ?([0-9]{4,10})(?![0-9])", re.ASCII)
"""Anything a user may mean as an order id: ``#W4566809``, ``#w4566809``, ``W 4566809``, and wrong
lengths; matched on the text with its digits of any script made ASCII (``_ascii_digits``)."""


def _ascii_digits(text: str) -> str:
    """``text`` with every decimal digit of any script as its ASCII digit ("#W４５６..." -> "#W456...")."""
    return "".join(str(unicodedata.decimal(c)) if c.isdecimal() and not c.isascii() else c for c in text)


def named_orders(text: str) -> tuple[list[str], bool]:
    """The order ids ``text`` names, as ``#W`` and 7 ASCII digits, in the order written and
    without repeats, however many it names; and whether it holds something shaped like an
    order id that is not one (a wrong length), which leaves the target unclear."""
    named: list[str] = []
    unclear = False
    for match in _ORDER_LIKE.finditer(_ascii_digits(text)):
        digits = match.group(1)
        if len(digits) == 7:
            if f"#W{digits}" not in named:
                named.append(f"#W{digits}")
        else:
            unclear = True
    return named, unclear


def check_named_target(state: ConversationState, call: Any) -> None:
    """Raise ``PolicyViolation(Rule.NAMED_TARGET)`` when the write ``call`` acts on an order or
    items other than those the asking message names (clause named-target)."""
    text = asking_message(state)
    if not text:
        return
    args = call_arguments(call)
    order_id = args.get("order_id")
    named, unclear = named_orders(text)
    if order_id and named and order_id not in named:
        shown = ", ".join(named[:5]) + (f" and {len(named) - 5} more" if len(named) > 5 else "")
        raise PolicyViolation(Rule.NAMED_TARGET, (
            f"the user's message names {shown}, not {order_id}: propose the change for the "
            "order the user named, or ask which order they mean"))
    if order_id and unclear and not named:
        raise PolicyViolation(Rule.NAMED_TARGET, (
            f"the user's message names an order id that is not one (#W and 7 digits), not {order_id}: ask the "
            "user which order they mean"))
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
