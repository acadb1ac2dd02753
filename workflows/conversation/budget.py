"""The per-conversation token budget: past it, the conversation goes to a human agent.

The budget (``SupportInput.token_budget``, from ``Settings.token_budget``; off by default) is
copied into ``state.usage.budget_tokens`` when a run starts (``transitions.start_run``) and counts every token the
conversation's model calls processed (``Usage.total_tokens``: uncached input, cache reads,
cache writes, output). It is checked twice:

- before each model call, on the tokens already used (``over_budget``);
- by the model activity, which counts the next request first (the provider's token counting,
  ``client.messages.count_tokens``; the offline stand-in answers by characters / 4) and
  refuses it with a non-retryable ``TokenBudgetExceeded`` when it would not fit the rest.

Either way the conversation takes the existing transfer path (a human-agent ticket, status
transferred) and the user is told why (``replies.budget_exceeded``), after what the writes
confirmed in this turn did: a hand-off right after a write must not hide its outcome (the
ticket lists them too).
"""

from __future__ import annotations

from typing import Any, Optional

from temporalio.exceptions import ActivityError, ApplicationError

from workflows.domain import keys, replies
from workflows.domain import transitions as tr
from workflows.domain.errors import ErrorType
from workflows.conversation.execute import open_ticket
from workflows.domain.state import ConversationState, ConversationStatus

BUDGET_REASON = "token budget exceeded: handed to a human agent"


class OverBudget(Exception):
    """Raised inside a turn when the next model call would pass the budget."""


def over_budget(state: ConversationState) -> bool:
    """True when the conversation has a budget and its model calls used all of it."""
    budget = state.usage.budget_tokens
    return budget is not None and state.usage.total_tokens() >= budget


def remaining_tokens(state: ConversationState) -> Optional[int]:
    """Tokens left of the budget (None: no budget)."""
    budget = state.usage.budget_tokens
    return None if budget is None else max(0, budget - state.usage.total_tokens())


def is_budget_refusal(err: ActivityError) -> bool:
    """True when a model activity failed because its request would pass the budget."""
    cause: Any = err.cause
    return isinstance(cause, ApplicationError) and cause.type == ErrorType.TOKEN_BUDGET_EXCEEDED.value


def writes_this_turn(state: ConversationState) -> tuple[list[str], list[str]]:
    """The details of the writes that reached the system of record in the current turn:
    (applied, refused)."""
    details = {s.operation_id: s.detail for s in state.steps if s.operation_id}
    done: list[str] = []
    not_done: list[str] = []
    for op in state.completed_operations:
        if op.turn == state.turn:
            (done if op.ok else not_done).append(details.get(op.operation_id, op.tool))
    return done, not_done


async def hand_over(state: ConversationState) -> str:
    """Hand the conversation to a human agent (ticket, status transferred); returns the reply,
    which first tells the outcome of this turn's writes (``writes_this_turn``)."""
    used = state.usage.total_tokens()
    done, not_done = writes_this_turn(state)
    summary = (f"The conversation reached its token budget ({used} of {state.usage.budget_tokens} tokens) "
               f"at turn {state.turn}; please take over."
               + (f" Done this turn: {'; '.join(done)}." if done else "")
               + (f" Refused this turn: {'; '.join(not_done)}." if not_done else ""))
    await open_ticket(state, summary, keys.transfer_ticket_key(state.conversation_id, state.turn))
    tr.close(state, ConversationStatus.TRANSFERRED, BUDGET_REASON)
    return replies.budget_exceeded(done, not_done)
