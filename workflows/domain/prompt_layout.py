"""The ``cached`` prompt layout: a state view ordered stable → volatile for prompt caching.

A request is read by the provider as tools → system → messages, and its prompt cache keys
each breakpoint by the exact prefix up to it, so whatever changes from call to call must come
after whatever does not. The layout (breakpoints marked ``*``, at most 4 allowed):

1. tools + system prompt *: the same for every conversation of a prompt version;
2. the conversation's records *: ``conversation_id``, ``schema_version``, ``status`` (they
   change once in a conversation, if at all), ``customer``, ``orders``, ``products``
   (they change only when a read or write returns new facts; when each order was last read,
   which changes with every re-read, goes to the volatile block as ``read_turns``);
3. its pinned facts *: append-only, so a new fact re-writes only this block;
4. the volatile block, never cached: the turn, status, steps, pending confirmation,
   completed operations, rejections, recent turns, unfolded reads, then the turn header.

Each block carries one ``<state_json>`` object; the view is their union (the offline
stand-in merges them, ``systems.model.view.parse_state_view``). ``<`` inside the JSON is
written ``\\u003c`` so that no text a user typed can close or open a block. Pure.
"""

from __future__ import annotations

import json
from typing import Any

STATE_OPEN_TAG = "<state_json>"
STATE_CLOSE_TAG = "</state_json>"
RECORD_KEYS = ("conversation_id", "schema_version", "status", "customer", "orders", "products")
"""The view keys of the records block (2)."""
FACT_KEYS = ("pinned_facts",)
"""The view keys of the pinned-facts block (3); every other key is volatile (4)."""
CACHED_ACTION_GUIDE = (
    "Call `propose_action` exactly once: a tool call (its input schema lists every tool, its class and "
    "arguments), a reply, a transfer to a human, or the end. You only propose: the workflow checks each "
    "proposal against the policy and the state, asks the customer to confirm writes, and tells you why "
    "it rejected one. The state comes in three parts: records (customer, orders, products as read), the "
    "facts the user stated (verbatim, with their turn), and the current step."
)


def block_json(value: Any) -> str:
    """Canonical JSON of ``value`` (sorted keys, no spaces) with ``<`` escaped, so equal
    values give byte-identical text and no string inside can hold a state tag."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).replace("<", "\\u003c")


def split_view(view: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``view`` as (records, pinned facts, volatile) dicts: ``RECORD_KEYS``, ``FACT_KEYS``,
    and every other key (so a recorded view of any shape renders whole)."""
    records = {k: view[k] for k in RECORD_KEYS if k in view}
    read_turns = {}
    if isinstance(records.get("orders"), dict):
        orders = {}
        for order_id, order in records["orders"].items():
            if isinstance(order, dict) and "read_turn" in order:
                read_turns[order_id] = order["read_turn"]
                order = {k: v for k, v in order.items() if k != "read_turn"}
            orders[order_id] = order
        records["orders"] = orders
    facts = {k: view[k] for k in FACT_KEYS if k in view}
    volatile = {k: v for k, v in view.items() if k not in RECORD_KEYS and k not in FACT_KEYS}
    if read_turns:
        volatile["read_turns"] = read_turns
    return records, facts, volatile


def _block(title: str, value: dict[str, Any]) -> str:
    return f"{title}\n{STATE_OPEN_TAG}{block_json(value)}{STATE_CLOSE_TAG}\n"


def render_cached(view: dict[str, Any]) -> tuple[list[str], str]:
    """(stable blocks, volatile text) of ``view``: the records and pinned-facts blocks, each
    to end with a cache breakpoint, then the volatile block and the turn header."""
    records, facts, volatile = split_view(view)
    stable = [
        _block("## Conversation records (customer, orders, products as read)", records),
        _block("## Facts the user stated (pinned verbatim, with their turn)", facts),
    ]
    header = []
    rejections = view.get("rejections") or []
    if rejections:
        last = rejections[-1]
        header.append(f"Your last proposal was rejected under [{last.get('rule')}]: {last.get('reason')}")
    header.append(f"User turn {view.get('turn')}: propose the next action.")
    return stable, _block("## Current step", volatile) + "\n".join(header)
