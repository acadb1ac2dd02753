"""What the stand-in model reads, and what it knows, about the process it serves.

The **state view** arrives as JSON between ``<state_json>`` and ``</state_json>`` in the
last user message of the request: that tag pair is the wire contract between the
caller's prompt renderer and this model (the caller documents the same pair). The view
is a plain dict: ``turn``, ``customer``, ``orders``, ``products``, ``pinned_facts``,
``recent_turns``, ``observations``, ``completed_operations``, ``rejections``,
``pending_confirmation`` (see the brains for the fields they read).

The stand-in's own knowledge, held here as plain values rather than imported:

- ``READ_TOOLS``: the tool names that only read (everything else changes data, or is
  ``transfer_to_human_agents``, which is its own kind of action);
- ``CANCEL_REASONS``: the only reasons a cancellation may give;
- ``RULE_MALFORMED_OUTPUT`` / ``RULE_USER_DECLINED``: rule ids it reacts to when it finds
  them in the view's ``rejections``;
- ``SERVED_STEPS``: the statuses of a step whose request was served (ended, or with a supervisor).

Also the small view helpers both brains share (raw action dicts, evidence look-ups), and
``honour_offered``: what becomes of a call of a tool the request did not offer.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal, InvalidOperation
from typing import Any, Optional

STATE_OPEN_TAG = "<state_json>"
STATE_CLOSE_TAG = "</state_json>"

READ_TOOLS = frozenset({
    "find_user_id_by_email",
    "find_user_id_by_name_zip",
    "get_user_details",
    "get_order_details",
    "get_product_details",
    "list_all_product_types",
    "calculate",
    "think",
})
CANCEL_REASONS = ("no longer needed", "ordered by mistake")
RULE_MALFORMED_OUTPUT = "malformed-model-output"
"""Our own previous output was unusable: carry on rather than apologise to the user."""
RULE_USER_DECLINED = "user-declined"
RULE_TOOL_ERROR = "tool-error"
"""A tool failed or refused; on a read, the system behind it could not answer."""
"""The user said no to a confirmation, or changed the subject."""
TRANSFER_TOOL = "transfer_to_human_agents"
SERVED_STEPS = frozenset({"done", "failed", "cancelled", "compensated", "unknown", "awaiting_approval"})
"""Statuses of a step (the view's ``steps``) whose write was dealt with, or is with a supervisor."""


def _blocks(content: str) -> list[str]:
    """The text of each ``<state_json>`` block, in order (the caller escapes ``<`` inside
    its JSON, so a block ends at the first closing tag after it opens)."""
    found, start = [], content.find(STATE_OPEN_TAG)
    while start >= 0:
        end = content.find(STATE_CLOSE_TAG, start)
        if end < 0:
            break
        found.append(content[start + len(STATE_OPEN_TAG) : end])
        start = content.find(STATE_OPEN_TAG, end)
    return found


def _load(text: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:  # the parser recurses per nesting level: too deep is not a view
        raise ValueError(f"the {STATE_OPEN_TAG} block is nested too deeply") from None


def _with_read_turns(view: dict[str, Any]) -> dict[str, Any]:
    """Put each order's ``read_turn`` back (the cached layout sends them apart, in
    ``read_turns``, so that a re-read leaves the cached records unchanged)."""
    read_turns, orders = view.pop("read_turns", None), view.get("orders")
    if isinstance(read_turns, dict) and isinstance(orders, dict):
        for order_id, turn in read_turns.items():
            if isinstance(orders.get(order_id), dict):
                orders[order_id]["read_turn"] = turn
    return view


VIEW_EMPTY: dict[str, Any] = {
    "customer": None, "orders": {}, "products": {}, "steps": [], "pinned_facts": [], "recent_turns": [],
    "observations": [], "pending_confirmation": None, "completed_operations": [], "rejections": [],
}
"""The view's keys that may be empty, with their empty value: the caller's lean layout leaves such
a key out (it says nothing), and the stand-in reads it back as this value."""

TURN_LINE = re.compile(r'^\[([0-9]+)\] (user|assistant): ("(?:[^"\\\n]|\\.)*")$', re.MULTILINE | re.ASCII)
"""A message of the caller's lean layout, one line: ``[7] user: "text"`` (the text a JSON string,
so it holds no line break: a user cannot type a line that passes for another message)."""


TURNS_HEADING = "## Recent turns\n"
"""The heading of the caller's turns log: its message lines follow, up to the next heading."""


def _turn_lines(content: str) -> list[dict[str, Any]]:
    """The messages of the turns log (``TURNS_HEADING``), one line each (``TURN_LINE``), in order.
    Only the log's own lines count: text after it (a rejection reason) cannot add a message."""
    start = content.find("\n" + TURNS_HEADING)
    if start < 0:
        return []
    start += 1 + len(TURNS_HEADING)
    end = content.find("\n## ", start)
    found = []
    for match in TURN_LINE.finditer(content[start : end + 1 if end >= 0 else len(content)]):
        try:
            text = json.loads(match.group(3))
        except ValueError:
            continue
        found.append({"role": match.group(2), "text": text, "turn": int(match.group(1))})
    return found


def parse_state_view(content: str) -> dict[str, Any]:
    """The state view of ``content``: the union of its ``<state_json>`` objects, in order
    (the caller's cached layout splits the view into stable and volatile blocks). A content
    whose blocks do not each parse is read as one block from the first opening tag to the last
    closing tag (the single layout, whose JSON may quote a tag a user typed).

    Raises ``ValueError`` when the content carries no state block or it is not a JSON object.
    """
    start = content.find(STATE_OPEN_TAG)
    end = content.rfind(STATE_CLOSE_TAG)
    if start < 0 or end < start:
        raise ValueError(f"content has no {STATE_OPEN_TAG} block")
    blocks = _blocks(content)
    if len(blocks) > 1:
        try:
            parts = [_load(b) for b in blocks]
        except ValueError:
            parts = []
        if parts and all(isinstance(p, dict) for p in parts):
            view: dict[str, Any] = {}
            for part in parts:
                view.update(part)
            new_facts = view.pop("new_pinned_facts", None)
            if isinstance(new_facts, list):  # the lean layout's facts pinned since its log's anchor
                view["pinned_facts"] = [*(view.get("pinned_facts") or []), *new_facts]
            messages = [] if "recent_turns" in view else _turn_lines(content)
            if messages:
                view["recent_turns"] = messages
            for key, empty in VIEW_EMPTY.items():
                view.setdefault(key, json.loads(json.dumps(empty)))  # a fresh copy each time
            return _with_read_turns(view)
    whole = _load(content[start + len(STATE_OPEN_TAG) : end])
    if not isinstance(whole, dict):
        raise ValueError(f"the {STATE_OPEN_TAG} block is not a JSON object")
    return whole


def amount(value: Any) -> Decimal:
    """An amount of money from the view: the state gives it as text (``"826.70"``, schema
    version 2) or, from older callers, a number (``826.7``); anything else counts 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)):
        return Decimal(0)
    if isinstance(value, str) and not value.isascii():
        return Decimal(0)  # Decimal() would read other scripts' digits
    try:
        parsed = Decimal(str(value))
    except InvalidOperation:
        return Decimal(0)
    return parsed if parsed.is_finite() else Decimal(0)


def canon(name: str, arguments: Optional[dict[str, Any]]) -> str:
    """Canonical text of a call, so equal calls compare equal whatever the key order."""
    return json.dumps([name, arguments or {}], sort_keys=True, separators=(",", ":"))


def tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Raw ``tool_call`` action dict."""
    return {"kind": "tool_call", "tool": {"name": name, "arguments": dict(arguments)}}


def reply(text: str) -> dict[str, Any]:
    """Raw ``reply`` action dict."""
    return {"kind": "reply", "text": text}


def transfer(summary: str) -> dict[str, Any]:
    """Raw ``transfer_to_human`` action dict."""
    return {"kind": "transfer_to_human", "summary": summary}


def offers(offered: Optional[frozenset[str]], name: str) -> bool:
    """True when the request lets the answer call ``name`` (``offered`` None: no limit)."""
    return offered is None or name in offered


MEMORY_WRITES = frozenset({"remember_fact", "forget_fact"})
"""The memory's writes: a request without them is a conversation whose memory is off."""
NOTHING_KEPT = ("I can't keep anything about you for your next conversations here, so there is nothing to "
                "remember or forget.")


def honour_offered(action: dict[str, Any], offered: Optional[frozenset[str]]) -> dict[str, Any]:
    """``action`` as a provider decoding under the request's schema can produce it: a call of
    a tool the request did not offer (``offered``, see ``wire.offered_tool_names``) becomes a
    transfer to a human agent, which the caller's policy prescribes for a request that cannot
    be handled with the tools at hand; a memory write not offered becomes a reply saying that
    nothing is kept (a colleague could not keep it either). Other actions pass unchanged."""
    if action.get("kind") != "tool_call":
        return action
    name = str((action.get("tool") or {}).get("name", ""))
    if offers(offered, name):
        return action
    if name in MEMORY_WRITES:
        return reply(NOTHING_KEPT)
    return transfer(f"The customer's request needs {name.replace('_', ' ')}, which I cannot do here; "
                    "please take over.")


def proposal_key(proposal: Optional[dict[str, Any]]) -> Optional[str]:
    """``canon`` of a proposal or raw action (tool call or transfer); None for others."""
    if not proposal:
        return None
    if proposal.get("kind") == "tool_call" and isinstance(proposal.get("tool"), dict):
        return canon(proposal["tool"].get("name", ""), proposal["tool"].get("arguments"))
    if proposal.get("kind") == "transfer_to_human":
        return canon(TRANSFER_TOOL, {"summary": proposal.get("summary", "")})
    return None


def rejected_keys(view: dict, turn: Optional[int] = None) -> list[str]:
    """Keys of the rejected proposals in the view (only those at ``turn`` if given)."""
    keys = []
    for rej in view.get("rejections") or []:
        if turn is not None and rej.get("turn") != turn:
            continue
        key = proposal_key(rej.get("proposal"))
        if key:
            keys.append(key)
    return keys


def rejection_for(view: dict, action: dict[str, Any], turn: int) -> Optional[dict[str, Any]]:
    """The rejection at ``turn`` of exactly this action, if any."""
    key = proposal_key(action)
    for rej in reversed(view.get("rejections") or []):
        if rej.get("turn") == turn and key is not None and proposal_key(rej.get("proposal")) == key:
            return rej
    return None


def observation_of(view: dict, name: str, arguments: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The latest observation of exactly this read, if still in the window."""
    key = canon(name, arguments)
    for obs in reversed(view.get("observations") or []):
        if canon(obs.get("tool", ""), obs.get("arguments")) == key:
            return obs
    return None


def tried(view: dict, name: str, arguments: dict[str, Any]) -> bool:
    """True when this call was already observed or rejected (so re-proposing it would loop)."""
    return observation_of(view, name, arguments) is not None or canon(name, arguments) in rejected_keys(view)


def facts(view: dict, kind: str) -> list[dict[str, Any]]:
    """Pinned facts of ``kind``, oldest first."""
    return [f for f in view.get("pinned_facts") or [] if f.get("kind") == kind]


def is_read(name: str) -> bool:
    """Reads change nothing; unknown names (e.g. ``transfer_to_human_agents``) are not reads."""
    return name in READ_TOOLS
