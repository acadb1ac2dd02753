"""The conversation invariants, checked against a real conversation's state, the
retail ledger and the external services' databases (for
``tests/workflows/test_conversation_invariants_server.py``).

``Record`` is what the test knows from the user's and the supervisor's side: the writes
the user said "yes" to right after their exact detail was shown, the approvals a
supervisor gave, and where each cancel was sent in the worker's log of write dispatches.
Each check raises AssertionError saying which invariant broke and how.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from bench.chaos.faults import duplicates
from systems.retail.backend import RetailBackend
from workflows.domain.state import ConversationState, Role, StepStatus

CONFIRMED_ONLY = (StepStatus.RUNNING, StepStatus.DONE, StepStatus.AWAITING_APPROVAL, StepStatus.UNKNOWN,
                  StepStatus.COMPENSATED)
"""Step statuses a write reaches only after the user's yes."""
NOT_MADE = (StepStatus.CANCELLED, StepStatus.FAILED)
NEEDS_APPROVAL = ("cancel_pending_order",)
"""Writes above the test's approval threshold (every cancel of the pending order)."""
_TOLD_DONE = re.compile(r"Done: I have cancelled order (#W\d+)")
_TOLD_APPROVED = re.compile(r"A supervisor approved your request, and it is done: (.*)$")


@dataclass
class Cancel:
    """A cancel sent to conversation ``cid`` when the worker had dispatched ``mark`` writes."""

    cid: str
    mark: int


@dataclass
class Record:
    """The user's and supervisor's side of an example (all its conversations)."""

    confirmed: dict[tuple[str, str], str] = field(default_factory=dict)
    """(operation id, tool) → the detail the user said yes to, right after it was shown."""
    approved: set[str] = field(default_factory=set)
    """Operation ids a supervisor approved."""
    cancels: list[Cancel] = field(default_factory=list)
    applied: int = 0
    """The most applied writes seen at once (what the example reached)."""


def _operation(key: str) -> tuple[str, str]:
    """(operation id, tool) of a write's idempotency key ``tool:subject:operation``."""
    return key.rsplit(":", 1)[1], key.split(":", 1)[0]


def applied(backend: RetailBackend, store: str) -> dict[str, dict]:
    """The store's applied ledger rows by idempotency key."""
    return {e["idempotency_key"]: e for e in backend.ledger_entries(store) if e["ok"]}


def check_step(record: Record, backend: RetailBackend, store: str, state: Optional[ConversationState],
               dispatched: list[str], databases: dict[str, str]) -> None:
    """Invariants (a), (b), (c), (e) after a step; ``state`` is the conversation's now."""
    done = applied(backend, store)
    # (a) no write without the user's yes to its exact detail
    for key in done:
        if key.endswith(".undo"):
            continue  # a compensation: it undoes a confirmed write
        op, tool = _operation(key)
        assert (op, tool) in record.confirmed, f"(a) {key} applied without the user's yes to its detail"
        if tool in NEEDS_APPROVAL:
            assert op in record.approved, f"(a) {key} applied without a supervisor's approval"
    if state is not None:
        for step in state.steps:
            if step.status in CONFIRMED_ONLY and step.operation_id:
                said = record.confirmed.get((step.operation_id, step.name))
                assert said is not None, f"(a) {step.name} {step.operation_id} is {step.status.value} without a yes"
                assert said == step.detail, f"(a) the user said yes to {said!r}, the step is {step.detail!r}"
        for approval in state.approvals:
            assert (approval.operation_id, approval.tool) in record.confirmed, \
                f"(a) a supervisor was asked about {approval.tool} {approval.operation_id} the user never confirmed"
    # (b) at most one applied effect per key in every system
    record.applied = max(record.applied, len(done))
    assert backend.duplicate_writes(store) == 0, "(b) the retail ledger applied a write twice"
    dupes = duplicates(databases)
    assert not any(dupes.values()), f"(b) duplicate effects: {dupes}"
    # (c) nothing new starts after a cancel, except compensations (escalations are tickets)
    for cancel in record.cancels:
        before = set(dispatched[:cancel.mark])
        late = [k for k in dispatched[cancel.mark:] if cancel.cid in k and k not in before
                and not k.endswith(".undo")]
        assert not late, f"(c) write(s) started after the cancel of {cancel.cid}: {late}"
    if state is not None:
        _check_told(state, done, record)


def _check_told(state: ConversationState, done: dict[str, dict], record: Record) -> None:
    """(e) the user is never told an effect happened that did not (nor that one applied
    was not made): steps, recorded operations and the assistant's words against the ledger."""
    for op in state.completed_operations:
        if op.ok and not op.compensated:
            assert op.idempotency_key in done, f"(e) {op.idempotency_key} recorded as done, not in the ledger"
    for step in state.steps:
        if not step.operation_id:
            continue
        keys = [k for k in done if _operation(k) == (step.operation_id, step.name)]
        if step.status is StepStatus.DONE:
            assert keys, f"(e) step {step.name} {step.operation_id} is done, nothing applied"
        if step.status in NOT_MADE:
            assert not keys, f"(e) step {step.name} {step.operation_id} is {step.status.value}, but {keys} applied"
    details_done = {record.confirmed.get(_operation(k)) for k in done}
    for turn in state.recent_turns:
        if turn.role is not Role.ASSISTANT:
            continue
        for order_id in _TOLD_DONE.findall(turn.text):
            assert any(k.startswith(f"cancel_pending_order:{order_id}:") for k in done), \
                f"(e) told {order_id} was cancelled; the ledger has no such cancel"
        told = _TOLD_APPROVED.search(turn.text)
        if told:
            assert told.group(1) in details_done, f"(e) told {told.group(1)!r} is done; it is not applied"


def check_settled(record: Record, state: ConversationState) -> None:
    """(d) every confirmed write of ``state`` ended applied, refused with a reason,
    escalated, withdrawn by a cancel, or still waits for a supervisor: none is left
    pending or running once the conversation is idle."""
    for step in state.steps:
        if (step.operation_id, step.name) not in record.confirmed:
            continue
        assert step.status not in (StepStatus.PENDING, StepStatus.RUNNING), \
            f"(d) confirmed {step.name} {step.operation_id} is still {step.status.value}"
        if step.status is StepStatus.FAILED:
            assert step.error, f"(d) confirmed {step.name} {step.operation_id} failed without a reason"
        if step.status is StepStatus.AWAITING_APPROVAL:
            assert any(a.operation_id == step.operation_id and a.status.value == "pending" for a in state.approvals) \
                or not state.is_open(), f"(d) {step.name} {step.operation_id} awaits an approval nobody can give"
