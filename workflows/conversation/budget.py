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

The tenant's daily budget (the spend cap across all its conversations, UTC days;
``Settings.tenant_daily_tokens``) is the same check one level up (``TenantCap``): before the
first model call of a turn the workflow asks it of an activity (``tenant_allowance``: the cap
and the tokens the tenant's conversations used today, from the journal), then counts its own
calls on top for the rest of the turn. At the cap the message is answered with
``TENANT_BUDGET_REPLY`` and no model call is made; the conversation stays open for the next
day. A turn's calls already running may pass the cap by at most that call's tokens. If the
activity fails (the journal's database is down) the turn is not capped: the journal would not
be recording the calls either, and a spend cap must not stop conversations that a database
outage would not.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Optional

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, FailureError

from workflows.activity_api import TenantActivitiesApi
from workflows.domain.contracts import AllowanceRequest, TenantAllowance
from workflows.options import TENANT

from workflows.domain import keys, replies
from workflows.domain import transitions as tr
from workflows.domain.errors import ErrorType
from workflows.conversation.execute import open_ticket
from workflows.domain.state import ConversationState, ConversationStatus

BUDGET_REASON = "token budget exceeded: handed to a human agent"
TENANT_BUDGET_PATCH = "tenant-daily-budget"
"""``workflow.patched`` id: runs of 1.0.0 replay their turns without asking the tenant's daily
budget (docs/releasing.md)."""
TENANT_BUDGET_REPLY = ("I can't answer right now: this service has used its assistant allowance for today. "
                       "Please try again after midnight UTC, or contact us another way if it is urgent. "
                       "Nothing about your orders was changed by this message.")
"""The reply to a message that arrives when the tenant is at its daily token budget."""
ALLOWANCE_TIMEOUT = timedelta(seconds=5)
ALLOWANCE_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), backoff_coefficient=2.0,
                              maximum_interval=timedelta(seconds=1), maximum_attempts=3)
"""The allowance is one small read of our own database, asked as a local activity: short, a few tries."""


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


class TenantCap:
    """``TenantCap(state)``: the tenant's daily budget as one turn sees it. ``spent()`` before
    each model call: the first asks the ``tenant_allowance`` local activity, later ones add
    the tokens this turn's calls used since then (deterministic: from the state)."""

    def __init__(self, state: ConversationState) -> None:
        self.state = state
        self.allowance: Optional[TenantAllowance] = None
        self.asked = False
        self.tokens_then = 0

    async def spent(self) -> bool:
        """True when the tenant is at its daily budget (no model call may follow)."""
        if not self.asked:
            if not workflow.patched(TENANT_BUDGET_PATCH):
                return False
            self.asked = True
            self.tokens_then = self.state.usage.total_tokens()
            self.allowance = await _ask_allowance(self.state.conversation_id)
        if self.allowance is None:
            return False
        return self.allowance.spent(self.state.usage.total_tokens() - self.tokens_then)


async def _ask_allowance(conversation_id: str) -> Optional[TenantAllowance]:
    tenant = workflow.info().typed_search_attributes.get(TENANT)
    try:
        return await workflow.execute_local_activity_method(
            TenantActivitiesApi.tenant_allowance, AllowanceRequest(conversation_id=conversation_id, tenant=tenant),
            start_to_close_timeout=ALLOWANCE_TIMEOUT, retry_policy=ALLOWANCE_RETRY,
            summary="the tenant's daily token budget")
    except (ActivityError, FailureError) as err:  # a local activity's failure comes without ActivityError
        cause = err.cause if isinstance(err, ActivityError) else err
        workflow.logger.warning("tenant allowance not known (%s); this turn is not capped", type(cause).__name__)
        return None
