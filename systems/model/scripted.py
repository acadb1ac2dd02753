"""``scripted_brain``: a deterministic stand-in model for benchmark runs.

It is not intelligence. It replays a τ-bench task's ground-truth plan, registered for
the conversation in the ``PlanBook`` (``plans.py``) by the benchmark runner::

    {"user": {"email": str|None, "first_name": str|None, "last_name": str|None, "zip": str|None},
     "actions": [{"name": <τ-bench tool>, "kwargs": {...}}, ...]}

and adds only what the caller's policy demands around it: authenticate, load the
customer's details, read an order before writing to it, read the products whose
variants an item change swaps in. The next action is a pure function of the plan and
the state view (``view.py``), so it is replay-safe and independent of the transcript.
Progress is found from evidence in the view — completed operations and rejected
proposals for writes; observations or loaded facts for reads — so it survives the
bounded observation window. A read the request does not offer (a prompt version that
withholds it) is skipped, as a read that failed is: the plan goes on and the caller's
policy decides; a withheld write is left to ``view.honour_offered``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Optional

from systems.model.view import (
    TRANSFER_TOOL,
    canon,
    is_read,
    observation_of,
    offers,
    proposal_key,
    reply,
    tool_call,
    tried,
)

FIND_USER_TOOLS = ("find_user_id_by_email", "find_user_id_by_name_zip")
ITEM_CHANGE_TOOLS = ("modify_pending_order_items", "exchange_delivered_order_items")
MAX_BATCH = 8
"""Reads proposed together at most (the workflow's ``MAX_READS_PER_BATCH``)."""
IDENTIFY_TEXT = "To get started, please tell me your email address, or your first name, last name and zip code."


def normalise_plan(plan: Any) -> dict[str, Any]:
    """``plan`` as ``{"user": {...}, "actions": [...]}`` (missing parts empty).

    Raises ``ValueError`` when it is not a JSON object with an ``actions`` list of objects.
    """
    if not isinstance(plan, dict) or not isinstance(plan.get("actions", []), list):
        raise ValueError("a plan must be a JSON object with an 'actions' list")
    user, actions = plan.get("user") or {}, list(plan.get("actions") or [])
    if not isinstance(user, dict) or not all(isinstance(a, dict) and isinstance(a.get("name"), str) for a in actions):
        raise ValueError("a plan's 'user' must be an object and each action an object with a 'name'")
    return {"user": user, "actions": actions}


def _identify(view: dict, plan: dict[str, Any], offered: Optional[frozenset[str]] = None) -> dict[str, Any]:
    """Step 1: the first lookup not yet tried: the plan's own, then email, then name+zip."""
    user = plan["user"]
    candidates: list[tuple[str, dict[str, Any]]] = []
    for act in plan["actions"]:
        if act.get("name") in FIND_USER_TOOLS:
            candidates.append((act["name"], act.get("kwargs") or {}))
            break
    if user.get("email"):
        candidates.append(("find_user_id_by_email", {"email": user["email"]}))
    if user.get("first_name") and user.get("last_name") and user.get("zip"):
        candidates.append(
            (
                "find_user_id_by_name_zip",
                {"first_name": user["first_name"], "last_name": user["last_name"], "zip": user["zip"]},
            )
        )
    for name, args in candidates:
        if offers(offered, name) and not tried(view, name, args):
            return tool_call(name, args)
    return reply(IDENTIFY_TEXT)


def _read_done(view: dict, name: str, kwargs: dict[str, Any]) -> bool:
    """A read of the plan is done if observed, or if the fact it reads is loaded."""
    customer = view.get("customer")
    if name in FIND_USER_TOOLS:
        return customer is not None
    if name == "get_user_details":
        return bool(customer and customer.get("details_loaded") and customer.get("user_id") == kwargs.get("user_id"))
    if name == "get_order_details" and kwargs.get("order_id") in (view.get("orders") or {}):
        return True
    if name == "get_product_details" and kwargs.get("product_id") in (view.get("products") or {}):
        return True
    return observation_of(view, name, kwargs) is not None


def next_plan_index(view: dict, actions: list[dict[str, Any]], offered: Optional[frozenset[str]] = None) -> int:
    """Index of the next plan action to propose; ``len(actions)`` when all are handled.

    A write (or transfer) is handled when a completed operation or a rejected proposal
    equals it; duplicates are matched by count (a failed write, recorded both as an
    operation and as a tool-error rejection, counts once). From just after the highest handled
    write, reads already done or not ``offered`` (None: all are) and ``think`` steps are skipped.
    """
    evidence: Counter[str] = Counter()
    failed: Counter[tuple[str, int]] = Counter()
    for op in view.get("completed_operations") or []:
        key = canon(op.get("tool", ""), op.get("arguments"))
        evidence[key] += 1
        if not op.get("ok"):
            failed[(key, op.get("turn", 0))] += 1
    for rej in view.get("rejections") or []:
        key = proposal_key(rej.get("proposal"))
        if key is None:
            continue
        # A write the tool refused is both a failed operation and a tool-error rejection
        # at the same turn: one attempt, counted once.
        if failed[(key, rej.get("turn", 0))] > 0:
            failed[(key, rej.get("turn", 0))] -= 1
            continue
        evidence[key] += 1
    used: Counter[str] = Counter()
    last_write = -1
    for j, act in enumerate(actions):
        name = act.get("name", "")
        if is_read(name):
            continue
        key = canon(name, act.get("kwargs"))
        if used[key] < evidence[key]:
            used[key] += 1
            last_write = j
    j = last_write + 1
    while j < len(actions):
        name, kwargs = actions[j].get("name", ""), actions[j].get("kwargs") or {}
        if name == "think" or (is_read(name) and (not offers(offered, name) or _read_done(view, name, kwargs))):
            j += 1
            continue
        break
    return j


def _prerequisites(view: dict, name: str, kwargs: dict[str, Any],
                   offered: Optional[frozenset[str]] = None) -> list[dict[str, Any]]:
    """Step 4: the reads a write on an order needs first (the order, then the products whose
    variants an item change swaps in), proposed together. A read already tried and still
    missing, or not offered, is not proposed: the write goes ahead and the workflow decides."""
    order_id = kwargs.get("order_id")
    if not order_id:
        return []
    orders = view.get("orders") or {}
    if order_id not in orders:
        args = {"order_id": order_id}
        if tried(view, "get_order_details", args) or not offers(offered, "get_order_details"):
            return []
        return [tool_call("get_order_details", args)]
    if name not in ITEM_CHANGE_TOOLS:
        return []
    product_of = {item["item_id"]: item["product_id"] for item in orders[order_id].get("items") or []}
    products = view.get("products") or {}
    needed = []
    for old in kwargs.get("item_ids") or []:
        product_id = product_of.get(old)
        if product_id and product_id not in products:
            args = {"product_id": product_id}
            if offers(offered, "get_product_details") and not tried(view, "get_product_details", args):
                needed.append(tool_call("get_product_details", args))
    return list({canon(a["tool"]["name"], a["tool"]["arguments"]): a for a in needed}.values())


def _planned_reads(view: dict, actions: list[dict[str, Any]], j: int,
                   offered: Optional[frozenset[str]] = None) -> list[dict[str, Any]]:
    """The plan's reads from ``actions[j]`` (a read) up to its next write, not done, tried or
    withheld yet: they do not depend on each other, so they are proposed together."""
    reads: dict[str, dict[str, Any]] = {}
    for act in actions[j:]:
        name, kwargs = act.get("name", ""), act.get("kwargs") or {}
        if name == "think":
            continue
        if not is_read(name):
            break
        if offers(offered, name) and not _read_done(view, name, kwargs) and not tried(view, name, kwargs):
            reads.setdefault(canon(name, kwargs), tool_call(name, kwargs))
    return list(reads.values())[:MAX_BATCH]


def _one_or_batch(calls: list[dict[str, Any]]) -> "dict[str, Any] | list[dict[str, Any]]":
    return calls[0] if len(calls) == 1 else calls


def _as_action(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    if name == TRANSFER_TOOL:
        return {"kind": "transfer_to_human", "summary": kwargs.get("summary") or "Transfer requested."}
    return tool_call(name, kwargs)


def closing_text(view: dict) -> str:
    """Step 5: the figures tools returned, verbatim — every ``calculate`` result in the
    observation window and one line per completed write (tool, order id, ok or error)."""
    lines = []
    for obs in view.get("observations") or []:
        if obs.get("tool") == "calculate":
            lines.append(f"{(obs.get('arguments') or {}).get('expression', '')} = {obs.get('result', '')}")
    for op in view.get("completed_operations") or []:
        args = op.get("arguments") or {}
        target = args.get("order_id") or args.get("user_id") or ""
        outcome = "ok" if op.get("ok") else op.get("result", "error")
        lines.append(f"{op.get('tool', '')} {target}: {outcome}".replace("  ", " "))
    if not lines:
        return "Thank you for contacting us. Goodbye."
    return "Summary of this conversation:\n" + "\n".join(lines) + "\nThank you for contacting us. Goodbye."


def scripted_brain(view: dict, plan: Optional[dict[str, Any]],
                   offered: Optional[frozenset[str]] = None) -> "dict[str, Any] | list[dict[str, Any]]":
    """Next raw action (``ProposedAction`` dict) for a benchmark run, from the plan and the
    view, or a list of reads proposed together (the plan's reads up to its next write, or the
    reads a write needs first); ``offered`` names the tools the request offers (None: all).

    Raises ``ValueError`` when there is no plan or it is not of the shape above.
    """
    if plan is None:
        raise ValueError("scripted_brain needs the conversation's plan")
    plan = normalise_plan(plan)
    customer = view.get("customer")
    if customer is None:
        return _identify(view, plan, offered)
    if not customer.get("details_loaded"):
        args = {"user_id": customer["user_id"]}
        if offers(offered, "get_user_details") and not tried(view, "get_user_details", args):
            return tool_call("get_user_details", args)
    actions = plan["actions"]
    j = next_plan_index(view, actions, offered)
    if j >= len(actions):
        return {"kind": "end", "text": closing_text(view)}
    name, kwargs = actions[j]["name"], actions[j].get("kwargs") or {}
    if name != TRANSFER_TOOL and not offers(offered, name):
        return tool_call(name, kwargs)  # a withheld write: no reads for it; honour_offered transfers
    if not is_read(name):
        pending = view.get("pending_confirmation")
        if pending and canon(pending["call"]["name"], pending["call"]["arguments"]) == canon(name, kwargs):
            # Already shown to the customer: ask for the yes instead of proposing it twice.
            return reply(f"Please confirm: {pending.get('detail') or name}. Reply yes to proceed.")
        needed = _prerequisites(view, name, kwargs, offered)
        if needed:
            return _one_or_batch(needed)
    elif name != TRANSFER_TOOL:
        planned = _planned_reads(view, actions, j, offered)
        if planned:
            return _one_or_batch(planned)
    return _as_action(name, kwargs)
