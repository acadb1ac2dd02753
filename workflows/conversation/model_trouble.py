"""Model trouble ends with a person: after ``MAX_MODEL_TROUBLE_TURNS`` user turns in a row
without a usable proposal from the model (malformed or truncated output, a refused or failed
call, no answer within the turn's steps) the conversation is handed to a human agent with a
ticket that says why, and the user is told so once instead of being apologised to turn after
turn. The token budget has its own hand-over (``workflows.conversation.budget``).
"""

from __future__ import annotations

from workflows.conversation.budget import writes_this_turn
from workflows.conversation.execute import open_ticket
from workflows.domain import keys, replies
from workflows.domain import transitions as tr
from workflows.domain.state import ConversationState, ConversationStatus
from workflows.options import MAX_MODEL_TROUBLE_TURNS

MODEL_TROUBLE_PATCH = "model-trouble-hand-over"
"""``workflow.patched`` id: runs of 1.0.0 apologise for the model's trouble turn after turn
(docs/releasing.md)."""
REASON = "the model gave no usable answer"
"""The closed conversation's ``ended_reason``."""


async def after_turn(state: ConversationState, reply: str, troubled: bool) -> str:
    """The reply that ends a user turn, once the turn's model trouble is counted: ``reply``
    itself, or the hand-over's reply when this ``troubled`` turn is the ``MAX_MODEL_TROUBLE_TURNS``-th
    in a row and its ticket opened (no ticket, no hand-over: the next troubled turn tries again)."""
    if not troubled:
        tr.model_served(state)
        return reply
    turns = tr.model_trouble_turn(state)
    if turns < MAX_MODEL_TROUBLE_TURNS:
        return reply
    last = state.last_rejection()
    done, not_done = writes_this_turn(state)
    summary = (f"The model gave no usable answer for {turns} user turns in a row (up to turn {state.turn}"
               + (f"; last: {last.reason[:300]}" if last else "") + "); please take over."
               + (f" Done this turn: {'; '.join(done)}." if done else "")
               + (f" Refused this turn: {'; '.join(not_done)}." if not_done else ""))
    if not await open_ticket(state, summary, keys.transfer_ticket_key(state.conversation_id, state.turn)):
        return reply
    tr.close(state, ConversationStatus.TRANSFERRED, REASON)
    return replies.model_trouble_handed_over(done, not_done)
