"""State-driven reads: the reads the state calls for before the model is asked.

A read whose next use follows from the state alone needs no model call to propose it: the
customer named by the email (or name and zip code) the user just stated, the authenticated
customer's profile, an order of theirs that the user's message names. A read's spec names
one of the functions below as its ``state_driven``; given the state, it returns the
arguments of the reads it calls for now (empty when none). The conversation runs each one
the policy accepts, folds its result, and only then asks the model
(``workflows.conversation.state_reads``).

Each function looks only at the current user message (its facts come from
``workflows.domain.facts``) and at what the state already holds: a loaded customer or profile,
an order read in this turn, an observation (a "not found" included) or a refusal stops a read
being called for again; an order named in a later message is read afresh. Pure and
deterministic: imported inside the workflow sandbox.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workflows.domain.facts import stated_in

if TYPE_CHECKING:
    from workflows.domain.state import ConversationState

MAX_NAMED_ORDERS = 3
"""Orders of one message read without a model call; a message naming more gets the first
three read and the model asks about the rest (``workflows.conversation.state_reads`` caps a
turn's state-driven reads as a whole)."""


def message_facts(state: ConversationState, kind: str) -> list[str]:
    """Values of ``kind`` in the current turn's user message, in the order written (at most
    ``workflows.domain.facts.MAX_FACTS_PER_KIND_PER_MESSAGE``); empty when the turn has no
    user message among the state's recent turns."""
    text = state.user_message(state.turn)
    return [] if text is None else stated_in(text, kind)


def customer_by_email(state: ConversationState) -> list[dict[str, Any]]:
    """``find_user_id_by_email``: before authentication, the first email of the message."""
    if state.customer is not None:
        return []
    return [{"email": email} for email in message_facts(state, "email")[:1]]


def customer_by_name_zip(state: ConversationState) -> list[dict[str, Any]]:
    """``find_user_id_by_name_zip``: before authentication, the first name ("my name is ...",
    "I'm ...") and zip code of the message, both in it."""
    if state.customer is not None:
        return []
    names, zips = message_facts(state, "name"), message_facts(state, "zip")
    if not names or not zips:
        return []
    first, last = names[0].split(" ", 1)
    return [{"first_name": first, "last_name": last, "zip": zips[0]}]


def customer_profile(state: ConversationState) -> list[dict[str, Any]]:
    """``get_user_details``: the authenticated customer's profile, once, when not loaded."""
    customer = state.customer
    if customer is None or customer.details_loaded:
        return []
    return [{"user_id": customer.user_id}]


def named_orders(state: ConversationState) -> list[dict[str, Any]]:
    """``get_order_details``: orders the message names that are the customer's (their profile
    lists them) and were not read in this turn yet, at most ``MAX_NAMED_ORDERS``: an order the
    user names is read afresh, so what they are told about it is the system of record's now.
    An id that is not the customer's is left to the model, which the policy answers (one-customer)."""
    customer = state.customer
    if customer is None or not customer.details_loaded:
        return []
    wanted = [order_id for order_id in message_facts(state, "order_id")
              if order_id in customer.order_ids and not _read_this_turn(state, order_id)]
    return [{"order_id": order_id} for order_id in wanted[:MAX_NAMED_ORDERS]]


def _read_this_turn(state: ConversationState, order_id: str) -> bool:
    order = state.orders.get(order_id)
    return order is not None and order.read_turn == state.turn
