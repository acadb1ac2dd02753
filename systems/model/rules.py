"""``rules_brain``: a deterministic rule-based stand-in model for interactive chat.

It is not intelligence: keyword rules over the state view (``view.py``)
that are just enough to walk a customer through the supported flows offline —
authenticate (pinned email, else pinned name + zip), load the customer's details,
read the order they mention, then act on the intent of their recent turns:

- "cancel" -> ``cancel_pending_order`` (reason: pinned ``cancel_reason``, else
  "ordered by mistake" if they said "mistake", else "no longer needed");
- "return" -> ``return_delivered_order_items`` (pinned item ids of that order, else the
  items whose product name the user wrote, else all of its items — also on "all" /
  "everything"; pinned payment method, else the order's original one);
- "status" / "where" / "track" -> a reply with the order's status and items;
- memory, once the customer's details are loaded: "please remember that refunds go to my gift
  card" (or "my preferred refund method is now my credit card") -> ``remember_fact`` of kind
  ``refund_method`` with the id of their payment method of that source; "remember ... deliver
  / parcel / door ..." -> ``delivery_instructions`` (the words after "remember that"); "remember
  ... I prefer Spanish" -> ``preferred_language``; each quoting the user's message. "what do you
  remember about me?" -> a reply from the facts read (with their source and age); "forget my
  delivery instructions" / "forget everything" -> ``forget_fact`` (that kind, or ``all``). A
  return without a stated payment method refunds to the remembered refund method when the
  profile still lists it (a fact flagged ``contradicted`` is never used);
- anything else -> a reply listing what it can do.

It never loops: a rejection at the current turn is answered with its reason, a
read already tried is not proposed again, and a write completed at this turn is
answered with its result.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

from systems.model.view import (
    CANCEL_REASONS,
    SERVED_STEPS,
    RULE_MALFORMED_OUTPUT,
    RULE_TOOL_ERROR,
    RULE_USER_DECLINED,
    amount,
    is_read,
    facts,
    observation_of,
    rejection_for,
    reply,
    tool_call,
    tried,
)

CAPABILITIES = (
    "I can help you with: cancelling a pending order, returning items from a delivered order, "
    "and telling you the status and items of one of your orders. Please tell me which of these "
    "you would like and the order id (e.g. #W1234567)."
)
IDENTIFY = "Before I can help, please tell me your email address, or your first name, last name and zip code."
STATUS_PREFIX = "Status of order"
UNREACHABLE = "Sorry, I can't reach our order system right now. Please try again in a moment."
BYE = re.compile(r"\b(bye|goodbye|that's all|that is all|nothing else|no thanks)\b", re.ASCII)
INTENT_WORDS = (
    ("cancel", re.compile(r"\bcancel", re.ASCII)),
    ("return", re.compile(r"\breturn", re.ASCII)),
    ("status", re.compile(r"\b(status|where|track)", re.ASCII)),
)
WRITE_TOOL = {"cancel": "cancel_pending_order", "return": "return_delivered_order_items"}
DONE_VERB = {
    "cancel_pending_order": "cancelled",
    "return_delivered_order_items": "requested the return of items from",
}


def _intent(text: str) -> Optional[str]:
    lowered = text.lower()
    for intent, pattern in INTENT_WORDS:
        if pattern.search(lowered):
            return intent
    return None


def _user_turns(view: dict) -> list[dict[str, Any]]:
    return [t for t in view.get("recent_turns") or [] if t.get("role") == "user"]


def _satisfied(view: dict, intent: str, since_turn: int) -> bool:
    """Whether an intent stated at ``since_turn`` was already served (so an older turn's
    intent is not acted on twice)."""
    if intent in WRITE_TOOL:
        tool = WRITE_TOOL[intent]
        done = any(op.get("tool") == tool and op.get("turn", 0) >= since_turn for op in view.get("completed_operations") or [])
        refused = any(
            r.get("turn", 0) >= since_turn and ((r.get("proposal") or {}).get("tool") or {}).get("name") == tool
            for r in view.get("rejections") or []
        )
        # a step that ended without an operation or a rejection (an approval that ran out of
        # time and went to a human agent), or waits for a supervisor, served it too: "hello?"
        # re-proposed the write the user had just been told a human agent (or a supervisor) has
        ended = any(
            s.get("name") == tool and s.get("turn", 0) >= since_turn and s.get("status") in SERVED_STEPS
            for s in view.get("steps") or []
        )
        return done or refused or ended
    return any(
        t.get("role") == "assistant" and t.get("turn", 0) >= since_turn and t.get("text", "").startswith(STATUS_PREFIX)
        for t in view.get("recent_turns") or []
    )


def _active_intent(view: dict) -> tuple[Optional[str], str]:
    """The intent to act on and the user text it came from: the latest user turn's, else
    the newest earlier one not yet served (it was stated before auth, say)."""
    turns = _user_turns(view)
    latest = turns[-1].get("text", "") if turns else ""
    for index, turn in enumerate(reversed(turns)):
        intent = _intent(turn.get("text", ""))
        if intent is None:
            continue
        if index == 0 or not _satisfied(view, intent, turn.get("turn", 0)):
            return intent, turn.get("text", "")
        if intent == "status" and ORDER_ID.search(latest):
            # "#W1?" after a status question asks the same of the order it names (a read, never a write)
            return intent, latest
        return None, ""
    return None, ""


def _latest(view: dict, kind: str) -> Optional[str]:
    found = facts(view, kind)
    return found[-1]["value"] if found else None


def _authenticate(view: dict) -> dict[str, Any]:
    """Propose the first lookup not yet tried (each pinned email, newest first, then
    name + zip), else ask for identification, with the last failure if there was one."""
    candidates: list[tuple[str, dict[str, Any]]] = []
    # the newest three emails only: older failed lookups may have left the view's observation
    # window, and trying them again would loop until the turn's step limit
    for fact in list(reversed(facts(view, "email")))[:3]:
        candidates.append(("find_user_id_by_email", {"email": fact["value"]}))
    name, zip_code = _latest(view, "name"), _latest(view, "zip")
    if name and zip_code and len(name.split()) >= 2:
        first, last = name.split(None, 1)
        candidates.append(("find_user_id_by_name_zip", {"first_name": first, "last_name": last, "zip": zip_code}))
    failures = []
    for tool, args in candidates:
        if not tried(view, tool, args):
            return tool_call(tool, args)
        obs = observation_of(view, tool, args)
        failures.append(_said(obs))
    if failures:
        return reply(f"I could not find your account ({failures[0]}). {IDENTIFY}")
    return reply(IDENTIFY)


def _said(obs: "dict[str, Any] | None") -> str:
    """A failed read's result as the reply quotes it: the system's reason without the tool's
    "Error: " prefix ("I could not find order #W1: Error: order not found" read like a crash)."""
    result = str(obs.get("result", "")) if obs else "not allowed"
    return result.removeprefix("Error: ")


RULE_SUFFIX = re.compile(r"\s*\((?:[a-z]+-)+[a-z]+\)", re.ASCII)
"""A policy clause id in parentheses, e.g. " (cancel-pending-only)": for operators and the log."""
TOOL_NAME = re.compile(r"\b([a-z]+(?:_[a-z]+)+)\b", re.ASCII)
"""A tool name (``modify_pending_order_items``); ids with digits (``credit_card_1``) do not match."""


def plain(reason: str) -> str:
    """``reason`` as a user reads it: without clause ids, an ``Error:`` prefix or tool names
    in snake case (users never see internal names)."""
    text = RULE_SUFFIX.sub("", reason.removeprefix("Error: "))
    return TOOL_NAME.sub(lambda m: m.group(1).replace("_", " "), text)


def _result_summary(op: dict[str, Any]) -> str:
    order_id = (op.get("arguments") or {}).get("order_id", "")
    if not op.get("ok"):
        return f"{plain(str(op.get('tool')))} on order {order_id} did not go through: {plain(op.get('result', ''))}"
    status = ""
    try:
        status = json.loads(op.get("result", "")).get("status", "")
    except (ValueError, AttributeError):
        pass  # a non-JSON result still counts as done; just no status to quote
    text = f"Done: I have {DONE_VERB.get(op.get('tool', ''), 'completed ' + str(op.get('tool')) + ' on')} order {order_id}."
    return text + (f" Its status is now '{status}'." if status else "")


UNUSABLE_RECORD = "Error: the record cannot be used"
"""How a read refused for its record's size or shape begins (``activities.record_limits``)."""
REPLY_ITEMS = 10
"""A status reply lists at most this many items (then how many more): a reply stays short
whatever the order holds."""


def _status_text(order: dict[str, Any]) -> str:
    listed = order.get("items") or []
    items = "; ".join(
        f"{i.get('name', '')} ({', '.join(f'{k}: {v}' for k, v in (i.get('options') or {}).items())}) "
        f"${amount(i.get('price')):.2f}"
        for i in listed[:REPLY_ITEMS]
    )
    if len(listed) > REPLY_ITEMS:
        items += f"; and {len(listed) - REPLY_ITEMS} more"
    cut = " Some of this order's details are too long to show in full." if order.get("cut") else ""
    return (
        f"{STATUS_PREFIX} {order['order_id']}: {order.get('status', 'unknown')}. "
        f"Items: {items or 'none'}. Total ${amount(order.get('total')):.2f}.{cut}"
    )


ORDER_ID = re.compile(r"#?W[0-9]{7}\b", re.ASCII)


def _target_order(view: dict) -> Optional[str]:
    """The order the user named last: the last order id of the newest user message that names
    one (a message may come back to an order named before), else the newest pinned one."""
    for turn in reversed(_user_turns(view)):
        named = ORDER_ID.findall(turn.get("text", ""))
        if named:
            return named[-1] if named[-1].startswith("#") else f"#{named[-1]}"
    return _latest(view, "order_id")


def _cancel(view: dict, order: dict[str, Any]) -> dict[str, Any]:
    if order.get("status") != "pending":
        return reply(f"Order {order['order_id']} is {order.get('status')}; only pending orders can be cancelled.")
    reason = _latest(view, "cancel_reason")
    if reason not in CANCEL_REASONS:
        said = " ".join(t.get("text", "") for t in _user_turns(view)).lower()
        reason = "ordered by mistake" if "mistake" in said else "no longer needed"
    return tool_call("cancel_pending_order", {"order_id": order["order_id"], "reason": reason})


def _return(view: dict, order: dict[str, Any], text: str) -> dict[str, Any]:
    customer = view.get("customer") or {}
    if order.get("status") != "delivered":
        return reply(f"Order {order['order_id']} is {order.get('status')}; only delivered orders can be returned.")
    in_order = [i["item_id"] for i in order.get("items") or []]
    pinned = []
    for fact in facts(view, "item_id"):
        if fact["value"] in in_order and fact["value"] not in pinned:
            pinned.append(fact["value"])
    named = [i["item_id"] for i in order.get("items") or [] if i.get("name") and i["name"].lower() in text.lower()]
    if re.search(r"\b(all|everything)\b", text.lower(), re.ASCII):
        item_ids = in_order
    else:
        item_ids = pinned or named or in_order
    remembered = _remembered(customer, "refund_method")
    owned = customer.get("payment_methods") or {}
    usable = remembered["value"] if remembered and remembered["value"] in owned else None
    payment = (_latest(view, "payment_method_id") or usable
               or next(iter(order.get("payment_method_ids") or []), None))
    if not item_ids:
        return reply(f"Order {order['order_id']} has no items to return.")
    if payment is None:
        return reply("Which payment method should receive the refund? The original one, or one of your gift cards?")
    return tool_call(
        "return_delivered_order_items", {"order_id": order["order_id"], "item_ids": item_ids, "payment_method_id": payment}
    )


def _guarded(view: dict, action: dict[str, Any]) -> dict[str, Any]:
    """Never propose what was rejected at this very turn; say why instead."""
    rej = rejection_for(view, action, view.get("turn", 0))
    if rej is not None:
        return reply(f"I can't do that: {plain(rej.get('reason', 'it was not allowed'))}")
    return action


ASK_MEMORY = re.compile(r"\bwhat (?:do|did) you (?:remember|know|keep) about me\b|\bwhat is remembered\b", re.ASCII)
FORGET = re.compile(r"\bforget\b", re.ASCII)
FORGET_ALL = re.compile(r"\bforget (?:everything|all|what you (?:remember|know))\b", re.ASCII)
REMEMBER = re.compile(r"\b(?:remember|from now on|preferred refund method|prefer(?:red)? refunds?)\b", re.ASCII)
REMEMBERED_WORDS = re.compile(r"\bremember(?: that| to|:)?\s+(.+)", re.ASCII | re.DOTALL)
SOURCES = (("gift_card", re.compile(r"\bgift ?cards?\b|\bgift_card", re.ASCII)),
           ("credit_card", re.compile(r"\bcredit ?cards?\b|\bcredit_card", re.ASCII)),
           ("paypal", re.compile(r"\bpaypal\b", re.ASCII)))
_WORD = r"(?:[A-Z]|[^\x00-\x7f])[^\s0-9!-/:-@\[-`{-~]*"
"""A capitalised word of any script (its first letter upper-case ASCII or beyond ASCII)."""
LANGUAGE = re.compile(r"\b(?:language is|answer me in|speak|prefer)\s+(" + _WORD + r"(?: " + _WORD + r"){0,2})", re.ASCII)
DELIVERY = re.compile(r"\b(?:deliver\w*|parcels?|packages?|door\w*|neighbou?r\w*|porch|concierge)\b", re.ASCII)
FORGET_KINDS = (("delivery_instructions", DELIVERY), ("refund_method", re.compile(r"\brefund", re.ASCII)),
                ("preferred_language", re.compile(r"\blanguage\b", re.ASCII)),
                ("open_complaint", re.compile(r"\bcomplaint", re.ASCII)))
QUOTE_CHARS = 500
MEMORY_READ = "get_remembered_facts"


REMEMBERED_SOURCE = re.compile(r"(?P<contradicted>contradicted by the profile, not used; )?"
                               r"(?:about order (?P<order_id>[^;]*); )?(?P<when>today|1 day ago|[0-9]+ days ago)"
                               r"(?:: (?P<words>.*))?", re.DOTALL)
"""A remembered fact's source as the current prompt shows it, after its value:
``[contradicted by the profile, not used; ][about order #W1; ]12 days ago: their words``."""


def _facts(customer: dict[str, Any]) -> list[dict[str, Any]]:
    """The customer's remembered facts as records, however the prompt shows them: records (kind,
    value, words, age_days, ...) or ``{kind: [value, source]}`` (``REMEMBERED_SOURCE``)."""
    memory = customer.get("memory") or []
    if isinstance(memory, list):
        return [f for f in memory if isinstance(f, dict)]
    facts = []
    for kind, entry in memory.items():
        value, source = (list(entry) + ["", ""])[:2] if isinstance(entry, list) else (str(entry), "")
        shown = REMEMBERED_SOURCE.fullmatch(str(source))
        if shown is None:
            facts.append({"kind": kind, "value": str(value)})
            continue
        when = shown["when"]
        facts.append({"kind": kind, "value": str(value), "order_id": shown["order_id"],
                      "words": shown["words"] or "", "contradicted": bool(shown["contradicted"]),
                      "age_days": 0 if when == "today" else int(when.split()[0])})
    return facts


def _remembered(customer: dict[str, Any], kind: str) -> Optional[dict[str, Any]]:
    """The remembered fact of ``kind`` that may be used: read, not contradicted."""
    return next((f for f in _facts(customer) if f.get("kind") == kind and not f.get("contradicted")), None)


def _memory_reply(customer: dict[str, Any]) -> dict[str, Any]:
    facts = _facts(customer)
    if not facts:
        return reply("I don't remember anything about you from earlier conversations.")
    said = []
    for fact in facts:
        age = fact.get("age_days", 0)
        when = "today" if age == 0 else f"{age} day{'s' if age != 1 else ''} ago"
        note = " (your account no longer lists it, so I don't use it)" if fact.get("contradicted") else ""
        what = fact.get("kind", "").replace("_", " ")
        said.append(f"{what}: {fact.get('value', '')}{note}, from what you told me {when} "
                    f"(\"{fact.get('words', '')}\")")
    return reply("Here is what I remember about you: " + "; ".join(said)
                 + ". You can ask me to change or forget any of it.")


def _memory(view: dict, customer: dict[str, Any], text: str) -> Optional[dict[str, Any]]:
    """The memory request of the current message ``text``, if it makes one."""
    lowered = text.lower()
    user_id = customer["user_id"]
    if ASK_MEMORY.search(lowered):
        return _memory_reply(customer)
    if FORGET.search(lowered):
        kind = "all" if FORGET_ALL.search(lowered) else next(
            (name for name, pattern in FORGET_KINDS if pattern.search(lowered)), None)
        if kind is None:
            return reply("What should I forget: your refund method, delivery instructions, preferred language, "
                         "or everything?")
        return tool_call("forget_fact", {"user_id": user_id, "kind": kind})
    if not REMEMBER.search(lowered):
        return None
    quote = text[:QUOTE_CHARS]
    if "refund" in lowered:
        methods = customer.get("payment_methods") or {}
        named = [m for m in methods if m in text]
        source = next((name for name, pattern in SOURCES if pattern.search(lowered)), None)
        chosen = named[:1] or [m for m, method in methods.items() if source and method.get("source") == source][:1]
        if not chosen:
            return reply("Which of your payment methods should refunds go to?")
        return tool_call("remember_fact", {"user_id": user_id, "kind": "refund_method", "value": chosen[0],
                                           "quote": quote})
    language = LANGUAGE.search(text)
    if language:
        return tool_call("remember_fact", {"user_id": user_id, "kind": "preferred_language",
                                           "value": language.group(1), "quote": quote})
    words = REMEMBERED_WORDS.search(text)
    if words and DELIVERY.search(lowered):
        value = words.group(1).strip().rstrip(".!").strip()
        return tool_call("remember_fact", {"user_id": user_id, "kind": "delivery_instructions", "value": value,
                                           "quote": quote})
    return None


def _decide(view: dict) -> dict[str, Any]:
    turn = view.get("turn", 0)
    done_now = [op for op in view.get("completed_operations") or [] if op.get("turn") == turn]
    if done_now:
        return reply(" ".join(_result_summary(op) for op in done_now) + " Is there anything else I can help with?")
    user_turns = _user_turns(view)
    latest = user_turns[-1].get("text", "") if user_turns else ""
    last = (view.get("rejections") or [None])[-1]
    if last and ((last.get("proposal") or {}).get("tool") or {}).get("name") == MEMORY_READ:
        last = None  # what is remembered could not be read: the conversation goes on without it
    if last and last.get("turn") == turn and last.get("rule") != RULE_MALFORMED_OUTPUT:
        # a malformed-output rejection is about our own previous output, not the user's request: carry on
        proposed = ((last.get("proposal") or {}).get("tool") or {}).get("name", "")
        if last.get("rule") == RULE_TOOL_ERROR and is_read(proposed):
            return reply(UNREACHABLE)  # a read's system could not answer: nothing to refuse, try later
        if last.get("rule") != RULE_USER_DECLINED:
            return reply(f"I can't do that: {plain(last.get('reason', 'it was not allowed'))}")
        if _intent(latest) is None:
            # "no" to a confirmation: acknowledge; a new request in the same message goes on below.
            return reply("Understood, I have not made that change. Is there anything else I can help with?")
    pending = view.get("pending_confirmation")
    if pending:
        return reply(f"Please confirm: {pending.get('detail', '')}. Reply yes to proceed.")
    if BYE.search(latest.lower()):
        return {"kind": "end", "text": "Thank you for contacting us. Goodbye."}

    customer = view.get("customer")
    if customer is None:
        return _authenticate(view)
    if not customer.get("details_loaded"):
        args = {"user_id": customer["user_id"]}
        obs = observation_of(view, "get_user_details", args)
        if obs is not None and obs.get("turn") == turn:
            return reply(f"I could not load your account details: {_said(obs)}")
        return tool_call("get_user_details", args)

    latest_turn = user_turns[-1].get("turn") if user_turns else None
    asked = _memory(view, customer, latest) if latest_turn == turn else None
    if asked is not None:
        return asked

    orders = view.get("orders") or {}
    order_id = _target_order(view)
    if order_id and order_id not in orders:
        args = {"order_id": order_id}
        obs = observation_of(view, "get_order_details", args)
        if obs is None and not tried(view, "get_order_details", args):
            return tool_call("get_order_details", args)
        if obs is not None and str(obs.get("result", "")).startswith(UNUSABLE_RECORD):
            return reply(f"I can't show order {order_id} here: its record is too large for me to read. "
                         "A human agent can help with it if you like.")
        return reply(f"I could not find order {order_id}: {_said(obs)}")

    intent, text = _active_intent(view)
    if intent is None:
        if "thank" in latest.lower() and not [f for f in view.get("pinned_facts") or [] if f.get("turn") == turn]:
            return {"kind": "end", "text": "You're welcome. Thank you for contacting us. Goodbye."}
        if customer.get("authenticated_turn") == turn:
            name = customer.get("first_name") or customer.get("user_id")
            return reply(f"Thank you, {name}, I have verified your identity. {CAPABILITIES}")
        return reply(CAPABILITIES)
    if order_id is None:
        known = ", ".join(customer.get("order_ids") or []) or "none on file"
        return reply(f"Which order do you mean? Your orders: {known}.")
    order = orders[order_id]
    if customer.get("user_id") and order.get("user_id") not in (None, "", customer.get("user_id")):
        return reply(f"Order {order_id} is not on your account, so I can't help with it.")
    if intent == "status":
        return reply(_status_text(order))
    if intent == "cancel":
        return _cancel(view, order)
    return _return(view, order, text)


def rules_brain(view: dict, plan: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """Next raw action (``ProposedAction`` dict) for interactive chat, from the view alone
    (``plan`` is accepted for the common brain signature and ignored)."""
    action = _decide(view)
    return _guarded(view, action) if action.get("kind") == "tool_call" else action
