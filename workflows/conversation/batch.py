"""Batched reads: several tool calls the model proposed in one answer (parallel tool use).

Each call is judged on its own: a repeat of an earlier call of the batch is dropped (it runs
once); a write is refused (a write is proposed alone, shown and confirmed; clause one-action),
and so is an identity lookup after the batch's first (the state the calls are judged on is the
one before the batch, and the first lookup's customer decides what the others may do);
reads past ``MAX_READS_PER_BATCH`` are refused with a reason the model can act on (propose
them next); every other read goes through the policy like a read proposed alone. The reads
accepted run together, as local activities in the same workflow task, and their results are
folded in the batch's order. The model call that proposed the batch gets one journal verdict.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Callable, Optional

from temporalio.exceptions import ActivityError

from workflows.conversation.execute import failure_reason, read
from workflows.domain import transitions as tr
from workflows.domain.actions import MAX_READS_PER_BATCH, ToolCallAction, call_digest
from workflows.domain.catalogue import Scope, spec_of
from workflows.domain.contracts import CancelRequest
from workflows.domain.policy.clauses import Rule
from workflows.domain.policy.validator import validate_proposal
from workflows.domain.state import ConversationState
from workflows.interrupts import Interrupted

WRITE_IN_BATCH = ("a write is proposed alone, never beside other calls: it is shown to the user and runs only "
                  "after their yes; propose it on its own")
ONE_LOOKUP = ("one identity lookup at a time: the customer it finds decides what any other may do; propose "
              "another after seeing its result")
OVER_BATCH = (f"at most {MAX_READS_PER_BATCH} reads run from one answer; propose this one again after seeing "
              "the results")


@dataclass(frozen=True)
class BatchOutcome:
    """What a batch did: reads that ``ran`` (results folded), calls ``refused`` (each a
    rejection in the state), and whether a read's system could not answer (``unavailable``)."""

    ran: int
    refused: int
    unavailable: bool = False


def judge_batch(state: ConversationState, calls: list[Any]) -> tuple[list[Any], int]:
    """The reads of ``calls`` that may run (repeats dropped), and how many calls were refused."""
    seen: set[str] = set()
    accepted: list[Any] = []
    refused = 0
    for call in calls:
        digest = call_digest(call)
        if digest in seen:
            continue  # the same read twice runs once
        seen.add(digest)
        proposal = tr.proposal_of(call)
        spec = spec_of(call.name)
        if spec.is_write:
            tr.reject(state, Rule.ONE_ACTION.value, WRITE_IN_BATCH, proposal)
        elif spec.scope is Scope.IDENTIFY and any(spec_of(c.name).scope is Scope.IDENTIFY for c in accepted):
            # each call is judged on the state before the batch: a second lookup could serve another customer
            tr.reject(state, Rule.ONE_ACTION.value, ONE_LOOKUP, proposal)
        elif len(accepted) >= MAX_READS_PER_BATCH:
            tr.reject(state, Rule.ONE_ACTION.value, OVER_BATCH, proposal)
        else:
            verdict = validate_proposal(state, ToolCallAction(tool=call))
            if verdict.accepted:
                accepted.append(call)
                continue
            tr.reject(state, verdict.rule.value, verdict.reason, proposal)
        refused += 1
    return accepted, refused


async def run_batch(state: ConversationState, calls: list[Any],
                    cancel_requested: Callable[[], Optional[CancelRequest]]) -> BatchOutcome:
    """Judge ``calls`` and run the reads accepted together; fold their results in order.
    Raises ``Interrupted`` when a cancel arrives while they run (nothing of theirs is folded)."""
    accepted, refused = judge_batch(state, calls)
    results = await asyncio.gather(*(read(state, call, cancel_requested=cancel_requested) for call in accepted),
                                   return_exceptions=True)
    if any(isinstance(result, Interrupted) for result in results):
        tr.read_cancelled(state, by_model=False)
        raise Interrupted()
    unavailable = False
    for call, result in zip(accepted, results):
        if isinstance(result, ActivityError):
            tr.read_failed(state, call, failure_reason(result), by_model=False)
            unavailable = True
        elif isinstance(result, BaseException):
            raise result
        else:
            tr.read_ran(state, call, result, by_model=False)
    outcome = BatchOutcome(ran=len(accepted), refused=refused, unavailable=unavailable)
    tr.batch_judged(state, outcome.ran, outcome.refused, outcome.unavailable)
    return outcome
