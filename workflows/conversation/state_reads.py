"""Running the reads the state calls for before the model is asked (state-driven reads).

Which reads follow from which facts is declared per tool in the catalogue (a read spec's
``state_driven``, ``workflows.domain.catalogue.state_reads``). Before each model call of a
turn, ``run_due_reads`` takes the next such read that the policy accepts and that was not
tried before, runs it as a local activity (in the same workflow task), folds its result,
and looks again: an email the user just stated becomes the authenticated customer, their
profile and the orders their message names, and the model's one call sees all of it. A
read that fails is recorded as a tool-error rejection, which the model sees and which keeps
it from running again (no retry storm while a system is down).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from temporalio.exceptions import ActivityError

from workflows.conversation.execute import failure_reason, read
from workflows.domain import transitions as tr
from workflows.domain.actions import ToolCallAction, call_arguments, make_tool_call
from workflows.domain.catalogue import STATE_DRIVEN, System, spec_of
from workflows.domain.contracts import CancelRequest
from workflows.domain.policy.validator import validate_proposal
from workflows.domain.state import ConversationState
from workflows.interrupts import Interrupted

MAX_STATE_DRIVEN_READS_PER_TURN = 6
"""Reads one turn runs without a model call: both identity lookups, the profile and three
named orders (``workflows.domain.catalogue.state_reads.MAX_NAMED_ORDERS``)."""

STATE_DRIVEN_READS_PATCH = "state-driven-reads"
"""``workflow.patched`` id: runs of 1.0.0 replay without these reads (docs/releasing.md)."""
MEMORY_READS_PATCH = "memory-reads"
"""``workflow.patched`` id: runs that started before memory replay without the read of the
customer's remembered facts (docs/releasing.md)."""


def _tried(state: ConversationState, name: str, arguments: dict[str, Any]) -> bool:
    """True when this exact read was observed (a "not found" included) or refused before."""
    if any(obs.tool == name and obs.arguments == arguments for obs in state.observations):
        return True
    proposal = {"kind": "tool_call", "tool": {"name": name, "arguments": arguments}}
    return any(rejection.proposal == proposal for rejection in state.rejections)


def next_due_read(state: ConversationState, memory: bool = False) -> Optional[Any]:
    """The next state-driven read (a typed tool call) the policy accepts and that was not
    tried before, or None; the memory's read (``System.MEMORY``) only when ``memory`` (the
    workflow's ``MEMORY_READS_PATCH``). Pure: it reads the state, it runs nothing."""
    for spec in STATE_DRIVEN:
        assert spec.state_driven is not None
        if spec.system is System.MEMORY and not memory:
            continue
        for arguments in spec.state_driven(state):
            call = make_tool_call(spec.name, arguments)
            if _tried(state, spec.name, call_arguments(call)):
                continue
            if validate_proposal(state, ToolCallAction(tool=call)).accepted:
                return call
    return None


@dataclass(frozen=True)
class DueReads:
    """What ``run_due_reads`` did: ``ran`` reads, and whether the last one's system could not
    answer (its retries ran out), which ends the turn with ``replies.SYSTEM_UNAVAILABLE``."""

    ran: int
    unavailable: bool = False


async def run_due_reads(state: ConversationState, cancel_requested: Callable[[], Optional[CancelRequest]],
                        limit: int = MAX_STATE_DRIVEN_READS_PER_TURN, memory: bool = False) -> DueReads:
    """Run the due state-driven reads, one after the other (each may call for the next), at
    most ``limit`` (what is left of the turn's ``MAX_STATE_DRIVEN_READS_PER_TURN``). A read
    whose retries run out is recorded as a tool-error rejection (the model sees it, and it is
    not run again) and stops the reads, unless it is the memory's read (the conversation goes on
    without what is remembered; the model sees the failure). Raises ``Interrupted`` when a cancel arrives during one."""
    ran = 0
    while ran < limit and cancel_requested() is None:
        call = next_due_read(state, memory)
        if call is None:
            break
        ran += 1
        try:
            result = await read(state, call, summary_prefix="state-driven: ", cancel_requested=cancel_requested)
        except Interrupted:
            tr.read_cancelled(state, by_model=False)
            raise
        except ActivityError as err:  # the system is down: asking the model now would not help
            tr.read_failed(state, call, failure_reason(err), by_model=False)
            if spec_of(call.name).system is System.MEMORY:
                continue  # what is remembered only shapes proposals: the conversation goes on without it
            return DueReads(ran, unavailable=True)
        tr.read_ran(state, call, result, by_model=False)
    return DueReads(ran)
