"""Every sentence statekeeper itself shows a user, in one place.

Users never see internal ids, exception names, parser text or stack traces: a refusal
is worded from its policy clause, and the technical reason stays in the state (for the
model and for operators) and in the logs. The one exception to "in one place": a policy
clause's refusal sentence is declared with the clause (``workflows.domain.policy.text``), so a
clause is written down once.
"""

from __future__ import annotations

import re

from workflows.domain.policy.clauses import Rule
from workflows.domain.policy.text import CLAUSE_REFUSALS

TRANSFERRED = "YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON."
"""τ-bench's transfer sentence; the benchmark's users recognise it."""
SYSTEM_UNAVAILABLE = "Sorry, I can't reach our order system right now. Please try again in a moment."
COULD_NOT_FINISH = "Sorry, I could not finish that request. Could you tell me again what you need?"
MODEL_TROUBLE = "Sorry, I'm having trouble working out the next step right now. Could you say again what you need?"
ESCALATED = ("I could not confirm that your request went through, so I have handed it to a human agent, "
             "who will check it and get back to you. Nothing will be done twice.")
ESCALATED_WITHOUT_TICKET = ("I could not confirm that your request went through, and I could not open a case "
                            "with a human agent just now either. Nothing will be done twice; please contact us "
                            "again so that someone can check it.")
TRANSFER_FAILED = ("I could not hand you over to a human agent just now, so you have not been transferred. "
                   "Please try again in a moment, or tell me what you need.")
CHANGED_SINCE_CONFIRMED = ("Your order or payment method changed after you confirmed, so I have not made that "
                           "change. Let me look at it again with you.")
ENDED = "Thank you, goodbye."
CANCELLED = "The conversation was cancelled."
OPERATOR_CANCEL_REASON = "cancelled by an operator (Temporal cancellation)"
RESUMED_WHILE_CLOSING = "the conversation's state was saved while it was being cancelled"
"""The reason of the cancel a run takes up when it starts from a state saved while closing."""
BUDGET_EXCEEDED = ("This conversation has reached the limit of what I can handle automatically, so I have "
                   "passed it to a human agent, who will pick it up from here. Please hold on.")
MODEL_TROUBLE_HANDED_OVER = ("I'm still having trouble working out the next step, so I have passed this "
                             "conversation to a human agent, who will pick it up from here. Please hold on.")
SUPERSEDED = "I see you've sent another message, so I'll answer that one instead."

_REFUSALS: dict[Rule, str] = {
    Rule.CONVERSATION_CLOSED: "this conversation has ended.",
    Rule.TOOL_ERROR: "our order system did not accept that request.",
    Rule.USER_DECLINED: "you did not confirm it.",
    Rule.AWAITING_APPROVAL: "a change to that order is already waiting for a supervisor's decision; "
    "I'll tell you as soon as it is decided.",
    Rule.APPROVAL_EXPIRED: "a change to that order is already with a human agent, who will follow up; "
    "I can't make another change to it here.",
}
"""The refusal sentences of the protocol reasons that are not policy clauses; a clause's own
is declared with its text (``workflows.domain.policy.text.CLAUSES``)."""


def refused(rule: str) -> str:
    """The reply when the model's proposals kept being refused under ``rule`` (a clause id)."""
    if rule == Rule.MALFORMED_OUTPUT.value:
        return MODEL_TROUBLE
    sentence = CLAUSE_REFUSALS.get(rule)
    if sentence is None:
        try:
            sentence = _REFUSALS[Rule(rule)]
        except (ValueError, KeyError):
            return COULD_NOT_FINISH
    return f"Sorry, I can't do that: {sentence}"


def escalated(withdrawn: "list[str]", ticket_opened: bool = True) -> str:
    """The reply when a write's outcome could not be shown and the conversation escalated;
    ``withdrawn``: details of confirmed writes still awaiting a supervisor, which the
    escalation withdraws (they are not made; the human agent's ticket lists them too).
    ``ticket_opened`` False: no human has the case, and the reply promises none."""
    first = ESCALATED if ticket_opened else ESCALATED_WITHOUT_TICKET
    if not withdrawn:
        return first
    who = "the agent will pick them up too" if ticket_opened else "please ask for them again"
    return (f"{first} These requests were still waiting for a supervisor's approval and have not been "
            f"made; {who}: {'; '.join(withdrawn)}")


def awaiting_approval(detail: str) -> str:
    """The reply to a yes whose write waits for a supervisor's decision."""
    return (f"Thank you. This needs a supervisor's approval before I can do it: {detail} "
            "I'll let you know as soon as it is decided.")


def _was(detail: str) -> str:
    """``detail`` quoted as what the user had asked for. A detail is worded as the change it
    makes ("... The full amount of 826.70 is refunded to the original payment method."): after
    "nothing was changed:" it read as if the refund had been made."""
    return f'Your request was: "{detail}"'


def requests(details: "list[str]") -> str:
    """Details of changes that were not (or not knowingly) made, each quoted as what was asked,
    for the same reason as ``_was``: "Not done: Cancel order ... The full amount of 826.70 is
    refunded ..." read as if the refund had been made."""
    return "; ".join(f'"{detail}"' for detail in details)


def approved(detail: str, refusal: "str | None") -> str:
    """What the user is told when a supervisor approved ``detail`` and it ran (``refusal``:
    None when it applied; otherwise the system's reason, which the user does not see)."""
    if refusal is None:
        return f"A supervisor approved your request, and it is done: {detail}"
    return f"A supervisor approved your request, but it did not go through. {_was(detail)}"


ANYTHING_ELSE = "Is there anything else I can help you with?"


def write_outcome(detail: str, refusal: "str | None", order_id: "str | None" = None,
                  order_status: "str | None" = None) -> str:
    """What the user is told right after a write they confirmed reached the system of record,
    composed from the state without a model call: ``refusal`` is None when it applied
    (otherwise the system's reason, which the user does not see); ``order_status`` is the
    status of the order it acted on as the write returned it, when it acted on one."""
    if refusal is not None:
        return f"Your request did not go through, so nothing was changed. {_was(detail)} {ANYTHING_ELSE}"
    now = f" Order {order_id} is now {order_status}." if order_id and order_status else ""
    return f"Your request is done: {detail}{now} {ANYTHING_ELSE}"


def made_earlier(detail: str, refusal: "str | None") -> str:
    """What the user is told when a write whose approval was rejected or ran out of time after a
    reset had already run before it (the ledger holds it under its key; ``refusal`` as in
    ``approved``): what was done is said, not "nothing was changed"."""
    if refusal is None:
        return f"Your request had already been made: {detail}"
    return f"Your request had already been tried, and it did not go through. {_was(detail)}"


def approval_rejected(detail: str) -> str:
    """What the user is told when a supervisor rejected ``detail``."""
    return f"A supervisor did not approve your request, so nothing was changed. {_was(detail)}"


def approval_expired(detail: str) -> str:
    """What the user is told when nobody decided on ``detail`` in time."""
    return (f"Your request was not decided in time, so I have handed it to a human agent, who will "
            f"get back to you. Nothing has been changed yet. {_was(detail)}")


def approval_expired_without_ticket(detail: str) -> str:
    """What the user is told when nobody decided on ``detail`` in time and no human agent could be
    given it (the ticketing system could not be reached): nothing runs, and no one is promised."""
    return (f"Your request was not decided in time, and I could not pass it to a human agent, so nothing "
            f"has been changed. Please ask again later. {_was(detail)}")


def already_handed_over(detail: str) -> str:
    """What the user is told when ``detail`` was handed to a human agent earlier (its approval
    expired in a run before a reset): it stays theirs, nothing runs here."""
    return (f"This request is already with a human agent, who will get back to you. Nothing has been "
            f"changed yet. {_was(detail)}")


def hand_off_unchecked(detail: str) -> str:
    """What the user is told when ``detail`` needs a supervisor and whether a human agent already
    has that order could not be checked (the ticketing system did not answer): nothing is parked
    or run, and, with no ticket possible, no human is promised."""
    return ("I could not check whether a colleague is already handling this order, so I have not made this "
            "change or passed it on for approval; nothing has been changed. Please ask again in a little while. "
            f"{_was(detail)}")


def _writes_told(done: "list[str]", not_done: "list[str]") -> "list[str]":
    """What this turn's confirmed writes did, in sentences: ``done`` and ``not_done`` are their
    details (the system's reasons stay in the state)."""
    return [*([f"Your request is done: {'; '.join(done)}"] if done else []),
            *([f"Your request did not go through: {requests(not_done)}"] if not_done else [])]


def budget_exceeded(done: "list[str]", not_done: "list[str]") -> str:
    """The budget hand-off's reply, first telling what this turn's confirmed writes did."""
    return " ".join([*_writes_told(done, not_done), BUDGET_EXCEEDED])


def model_trouble_handed_over(done: "list[str]", not_done: "list[str]") -> str:
    """The reply when the model's trouble hands the conversation to a person, first telling what
    this turn's confirmed writes did."""
    return " ".join([*_writes_told(done, not_done), MODEL_TROUBLE_HANDED_OVER])


def answer_yes_or_no(detail: str) -> str:
    """The reply to an answer that looked like a yes or a no without being one: the shown
    write, asked again."""
    return f"Please answer yes or no to: {detail}"


def not_made(detail: str) -> str:
    """Opens the reply to a message that moved on from the shown write ``detail`` without a yes
    or a no: the write was not made."""
    return f"I have not made the change you were asked to confirm ({detail.rstrip('.')})."


def finished(status: str) -> str:
    """The reply to a message queued behind the end of the conversation."""
    return f"The conversation is {status}."


def confirmation_prompt(detail: str) -> str:
    """The message that asks for confirmation of ``detail``."""
    return f"Please confirm: {detail} Reply 'yes' to proceed or 'no' to stop."


def resolved(detail: str, applied: bool) -> str:
    """What the user is told when an operator, having checked the system, resolved the
    escalated request ``detail`` whose outcome was unknown (``applied`` or not)."""
    if applied:
        return f"A colleague checked your request, and it went through: {detail} How else can I help?"
    return (f"A colleague checked your request, and it did not go through; nothing was changed. {_was(detail)} "
            "You can ask me to try again.")


def unknown_store_reason(store: str) -> str:
    """Why the conversation closed (its ``ended_reason``) and the update's message."""
    return f"unknown store {store}: the system of record has no such store"


CLAUSE_SUFFIX = re.compile(r"\s*\(((?:[a-z]+-)+[a-z]+)\)\s*$", re.ASCII)
"""The clause id a policy refusal written for the model ends with: ``"<why> (cancel-pending-only)"``."""
_CALLER_CLAUSES: dict[str, str] = {
    Rule.ONE_CUSTOMER.value: "the order, and any payment method the request names, must belong to the "
    "order's owner.",
    Rule.CHECK_STATUS.value: "the order could not be read in full from the order system.",
}
"""A ``POST /refunds`` caller's sentence of a clause whose own refusal sentence speaks to a chat
user ("the account you identified yourself with"); any other clause's is its own."""
POLICY_REFUSED = "the refund policy does not allow it."
"""A caller's sentence of a clause without a refusal sentence."""


def refund_refused(reason: str) -> str:
    """The ``reason`` a ``POST /refunds`` caller reads of a refund refused for ``reason`` (the
    workflow's text: a policy refusal written for the model, ``"<why, with ids and hints for
    the model> (<clause id>)"``; or a sentence already worded for callers: a supervisor's
    rejection, an expired approval, the order system's own refusal such as "order not found").
    A policy refusal becomes its clause's sentence ("Not allowed: only pending orders can be
    cancelled, ... Nothing was changed."), never the clause id or the model's text; any other
    reason is returned as it is, without an ``"Error: "`` prefix."""
    text = reason.removeprefix("Error: ").strip()
    clause = CLAUSE_SUFFIX.search(text)
    if clause is None:
        return text
    rule = clause.group(1)
    sentence = _CALLER_CLAUSES.get(rule) or CLAUSE_REFUSALS.get(rule) or POLICY_REFUSED
    return f"Not allowed: {sentence} Nothing was changed."
