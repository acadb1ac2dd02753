"""The conversations and the baselines of ``bench/tokens.py``.

- ``script``: a conversation of N user turns built from a τ-bench cancel task: identify by
  email (turn 1), off-topic turns, the order id at turn 4 (the fact the final action depends
  on), off-topic turns and corrections that pin no other order, then the cancellation with
  the task's reason (turn N-1) and the user's yes (turn N).
- ``Transcript``: what a transcript-resending agent would hold of the same conversation, as
  Messages API messages (user text, ``tool_use``/``tool_result`` pairs with the raw results,
  assistant text), and its requests: ``naive`` (whole transcript, no breakpoints),
  ``naive_cached`` (whole transcript, breakpoints on the system block and on the last block:
  incremental prefix caching, naive's best case) and ``window`` (the last ``k`` user turns,
  breakpoint on the system block only).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from systems.model.rules import rules_brain
from workflows.domain.catalogue import CATALOGUE
from workflows.domain.policy.text import policy_text

TAUBENCH = Path(__file__).resolve().parents[2].parent / "shared" / "taubench-retail"
EPHEMERAL = {"type": "ephemeral"}
OFF_TOPIC = [
    "By the way, do you also sell gift wrapping for the holidays?",
    "Is your shop open on weekends, or only on weekdays?",
    "My neighbour bought a really nice lamp from you last year, I might get one too.",
    "How long have you been in business? Just curious.",
    "The weather here has been awful all week, lots of rain.",
    "Do you have a loyalty programme or points I can collect?",
    "Your website looks different from last time, did you redesign it?",
    "Sorry, I got distracted by a phone call. I'm back now.",
    "Can I pay with a different card next time I order something?",
    "Do you ship to Canada as well, for a friend of mine?",
]
STATUS_QUESTIONS = [
    "Has anything changed with my order since we last spoke?",
    "Could you check the status of my order again, please?",
    "Is my order still pending?",
]
"""On-topic turns: a careful agent re-reads the order before answering (``status_brain``)."""
STATUS_EVERY = 4
"""Every 4th padding turn asks for the order's status (none in the window before the end)."""
CORRECTIONS = [
    "Sorry, typo in my last message: I meant Tuesday, not Thursday.",
    "Actually, ignore what I said about the gift wrapping, I found it myself.",
    "Oops, my zip code is {zip}, in case you need it.",
    "Correction: it was my sister who bought the lamp, not my neighbour.",
]


def _load(name: str) -> Any:
    path = TAUBENCH / name
    if not path.exists():
        from systems.retail import DATA_DIR  # the packaged copy of the same data
        path = DATA_DIR / name
    return json.loads(path.read_text(encoding="utf-8"))


def cancel_tasks(data: dict[str, Any]) -> list[dict[str, Any]]:
    """τ-bench tasks whose plan cancels a pending order: ``{user, email, zip, order_id, reason}``."""
    found = []
    for task in _load("tasks_train.json"):
        for action in task["actions"]:
            kwargs = action.get("kwargs") or {}
            order = data["orders"].get(kwargs.get("order_id", ""))
            if action["name"] == "cancel_pending_order" and order and order["status"] == "pending":
                user = data["users"][task["user_id"]]
                found.append({"task_index": task["task_index"], "user": task["user_id"], "email": user["email"],
                              "zip": user["address"]["zip"], "order_id": kwargs["order_id"],
                              "reason": kwargs["reason"]})
    return found


def script(task: dict[str, Any], turns: int) -> list[str]:
    """The user's messages of a ``turns``-turn conversation (at least 6) for a cancel ``task``."""
    if turns < 6:
        raise ValueError("a conversation needs at least 6 turns")
    messages = [f"Hi, my email is {task['email']}.", OFF_TOPIC[0], OFF_TOPIC[1],
                f"The order I am writing about is {task['order_id']}."]
    padding = turns - 6
    for i in range(padding):
        if i % STATUS_EVERY == 1 and i < padding - 8:
            messages.append(STATUS_QUESTIONS[(i // STATUS_EVERY) % len(STATUS_QUESTIONS)])
            continue
        pool = CORRECTIONS if i % 5 == 4 else OFF_TOPIC
        messages.append(pool[(i // 5 if pool is CORRECTIONS else i + 2) % len(pool)].format(zip=task["zip"]))
    messages.append(f"Please cancel that order now, it was {task['reason']}.")
    messages.append("yes")
    return messages


def status_brain(view: dict[str, Any], plan: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The stand-in's rules brain, plus what a careful agent does before it answers a status
    question: read the order again (once per turn), so the answer is the system of record's now."""
    turns = [t for t in view.get("recent_turns") or [] if t.get("role") == "user"]
    latest = turns[-1].get("text", "") if turns else ""
    orders = view.get("orders") or {}
    pinned = [f["value"] for f in view.get("pinned_facts") or [] if f.get("kind") == "order_id"]
    if latest in STATUS_QUESTIONS and pinned and pinned[-1] in orders:
        order_id = pinned[-1]
        read_at = (view.get("read_turns") or {}).get(order_id, orders[order_id].get("read_turn"))
        if read_at != view.get("turn"):
            return {"kind": "tool_call", "tool": {"name": "get_order_details", "arguments": {"order_id": order_id}}}
        order = orders[order_id]
        return {"kind": "reply", "text": f"Order {order_id} is {order.get('status')}; nothing else has changed."}
    return rules_brain(view, plan)


def naive_tools(withheld: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """The tools a transcript agent offers: the catalogue but ``withheld`` (what statekeeper's
    prompt version does not offer its model), each with its argument schema."""
    return [{"name": s.name, "description": s.description, "input_schema": _untitled(s.args.model_json_schema())}
            for s in CATALOGUE.values() if s.name not in withheld]


def _untitled(node: Any) -> Any:
    # the same cleaning statekeeper's schema gets (``activities.llm.wire``): no pydantic titles
    if isinstance(node, dict):
        return {k: _untitled(v) for k, v in node.items() if not (k == "title" and isinstance(v, str))}
    return [_untitled(v) for v in node] if isinstance(node, list) else node


NAIVE_SYSTEM = ("You are the retail support assistant.\n\n## Policy\n" + policy_text()
                + "\n\nCall one tool at a time; ask the customer to confirm every write.")


class Transcript:
    """The transcript of the conversation so far, as Messages API messages, and the requests of an
    agent that offers the tools statekeeper's model is offered (``withheld``: the prompt version's
    ``withheld_tools``)."""

    def __init__(self, withheld: frozenset[str] = frozenset()) -> None:
        self.tools = naive_tools(withheld)
        self.messages: list[dict[str, Any]] = []
        self.user_starts: list[int] = []  # index of each user turn's first message
        self._ids = 0

    def user(self, text: str) -> None:
        """A new user turn."""
        self.user_starts.append(len(self.messages))
        self.messages.append({"role": "user", "content": [{"type": "text", "text": text}]})

    def tool(self, name: str, arguments: dict[str, Any], result: str) -> None:
        """A tool call of the agent and its raw result."""
        self._ids += 1
        tool_id = f"toolu_{self._ids:06d}"
        self.messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": tool_id, "name": name, "input": arguments}]})
        self.messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tool_id, "content": result}]})

    def assistant(self, text: str) -> None:
        """The agent's reply."""
        self.messages.append({"role": "assistant", "content": [{"type": "text", "text": text}]})

    def request(self, strategy: str, model: str, window: int) -> dict[str, Any]:
        """The request body of ``strategy`` (naive, naive_cached, window) at this point."""
        messages = self.messages
        if strategy == "window" and len(self.user_starts) > window:
            messages = messages[self.user_starts[-window]:]
        cached = strategy in ("naive_cached", "window")
        system: Any = [{"type": "text", "text": NAIVE_SYSTEM, **({"cache_control": EPHEMERAL} if cached else {})}]
        body = {"model": model, "max_tokens": 1024, "system": system, "tools": self.tools,
                "messages": json.loads(json.dumps(messages))}
        if strategy == "naive_cached":
            body["messages"][-1]["content"][-1]["cache_control"] = dict(EPHEMERAL)
        return body


def contains(body: dict[str, Any], fact: str) -> bool:
    """Whether the request text holds ``fact`` verbatim."""
    return fact in json.dumps(body, ensure_ascii=False)


def weighted(usage: dict[str, int], write_price: float = 1.25) -> float:
    """Cost-weighted input tokens: fresh 1×, cache read 0.1×, cache write ``write_price`` (the
    provider's prices relative to fresh input: 1.25× for the 5-minute cache, 2× for 1 hour)."""
    return (usage["input_tokens"] + 0.1 * usage["cache_read_input_tokens"]
            + write_price * usage["cache_creation_input_tokens"])


def shared_prefix(body: dict[str, Any]) -> dict[str, Any]:
    """Another conversation's request with the same tools and system as ``body``: what traffic
    that keeps the shared prefix warm sends (its messages are its own, so only the system
    breakpoint can hit)."""
    other = json.loads(json.dumps({k: v for k, v in body.items() if k != "messages"}))
    other["messages"] = [{"role": "user", "content": [{"type": "text", "text": "another conversation"}]}]
    return other


def context(usage: dict[str, int]) -> int:
    """The whole prompt of one call, in tokens."""
    return usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]


def max_over_min(values: list[int]) -> Optional[float]:
    """max/min of ``values`` (None when empty)."""
    return round(max(values) / min(values), 3) if values else None
