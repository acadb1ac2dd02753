"""What a backtest compares, as pure functions: the state a recorded view stands for, the
policy's verdict on a proposal in it, and how a new proposal differs from the recorded one.

A **verdict class** is ``accepted``, ``rejected:<rule>`` or ``malformed`` (no usable
proposal). A row is ``same`` when the new proposal equals the recorded one and its class
too, ``different_verdict`` when the classes differ (whatever the proposals), else
``different_proposal`` (another proposal the policy treats alike).

The view (``workflows.domain.prompt.state_view``) is a window of the state, so ``state_from_view``
approximates what it cannot see (see its docstring); the policy reads only the customer,
the orders, the products, the completed operations, the status and the pending approvals.
"""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal
from enum import Enum
from typing import Any, Optional

from pydantic import ValidationError

from workflows.domain.actions import ToolCallAction, parse_model_proposal
from workflows.domain.catalogue import spec_of
from workflows.domain.policy.approvals import Approval
from workflows.domain.journal import ACCEPTED_VERDICTS, Verdict
from workflows.domain.migrations import StateIncompatible, load_state
from workflows.domain.policy.validator import validate_proposal
from workflows.domain.state import ConversationState, ConversationStatus, Phase, StepStatus

ACCEPTED = "accepted"
MALFORMED = "malformed"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

class Difference(str, Enum):
    """How one re-asked model call compares with the recorded one."""

    SAME = "same"
    DIFFERENT_PROPOSAL = "different_proposal"
    DIFFERENT_VERDICT = "different_verdict"


class UnreadableView(ValueError):
    """A recorded view does not load as the current state (e.g. recorded under a state
    schema the current code no longer reads)."""


def state_from_view(view: dict[str, Any]) -> ConversationState:
    """The state a recorded ``view`` stands for, as far as the policy needs it.

    Approximated: the view's windows (last 10 steps and products, 20 completed operations,
    5 rejections, 6 turns, 8 observations) are taken for the whole; ``store``,
    ``system_of_record``, ``usage`` and the operations' compensation data are absent; a
    pending approval is rebuilt from its step (status ``awaiting_approval``) with the order
    its detail names (only its order matters to the policy: one decision per order at a time).
    Raises ``UnreadableView``.
    """
    # the view carries the schema version of its state: an older one goes through the same
    # migration chain a saved state does (workflows.domain.migrations)
    try:
        state = load_state(dict(view))
    except StateIncompatible as err:
        raise UnreadableView(f"the view does not load as the current state: {err.reason}") from err
    if state.status is not ConversationStatus.ACTIVE:
        # the view leaves the phase out (the model reads the status); a view of version 3 or later
        # loads as open, and the policy refuses every proposal in a closed conversation
        state.phase = Phase.CLOSED
    for step in state.steps:
        if step.status is StepStatus.AWAITING_APPROVAL:
            order_id = next((o for o in state.orders if o in step.detail), None)
            if order_id is not None:
                state.approvals.append(Approval(
                    approval_id=f"backtest~{step.step_id}", workflow_id="", operation_id=step.operation_id or "",
                    digest="", tool=step.name, order_id=order_id, amount=Decimal(0), reasons=[],
                    requested_at=_EPOCH, expires_at=_EPOCH))
    return state


def parse(proposal: Optional[dict[str, Any]]) -> Any:
    """The typed ``ModelProposal`` of a recorded proposal (a ``ProposedAction`` or a batch of
    tool calls), or None (none, or no longer valid)."""
    if proposal is None:
        return None
    try:
        return parse_model_proposal(proposal)
    except ValidationError:
        return None


def normalised(proposal: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """A proposal as the current code writes it (defaults filled, JSON types), so equal
    proposals compare equal; one that no longer parses is kept as recorded."""
    action = parse(proposal)
    return proposal if action is None else action.model_dump(mode="json")


def policy_class(state: ConversationState, proposal: Optional[dict[str, Any]]) -> tuple[str, str]:
    """The current policy's ``(verdict class, reason)`` on ``proposal`` in ``state``:
    ``malformed`` for no proposal or one that does not parse."""
    action = parse(proposal)
    if action is None:
        return MALFORMED, "no usable proposal" if proposal is None else "the proposal no longer parses"
    if action.kind == "tool_calls":
        # a batch is accepted when one of its reads is (the workflow runs those; the rest are refused)
        judged = [validate_proposal(state, ToolCallAction(tool=call)) for call in action.tools
                  if not spec_of(call.name).is_write]
        if any(verdict.accepted for verdict in judged):
            return ACCEPTED, ""
        return "rejected:", "; ".join(verdict.reason for verdict in judged) or "a batch of writes only"
    verdict = validate_proposal(state, action)
    if verdict.accepted:
        return ACCEPTED, ""
    return f"rejected:{verdict.rule.value if verdict.rule else ''}", verdict.reason


def recorded_class(verdict: Optional[str], rule: Optional[str]) -> Optional[str]:
    """The verdict class of a recorded verdict (``workflows.domain.journal.Verdict`` value), or None
    when it is no policy verdict: ``superseded`` (discarded before validation) or not recorded."""
    try:
        value = Verdict(verdict) if verdict is not None else None
    except ValueError:
        return None
    if value in ACCEPTED_VERDICTS:
        return ACCEPTED
    if value is Verdict.REJECTED:
        return f"rejected:{rule or ''}"
    if value is Verdict.MALFORMED:
        return MALFORMED
    return None


def classify(recorded: Optional[dict[str, Any]], recorded_verdict: str,
             new: Optional[dict[str, Any]], new_verdict: str) -> Difference:
    """Compare a recorded proposal and verdict class with the new ones (see the module)."""
    if recorded_verdict != new_verdict:
        return Difference.DIFFERENT_VERDICT
    if normalised(recorded) == normalised(new):
        return Difference.SAME
    return Difference.DIFFERENT_PROPOSAL


def describe(proposal: Optional[dict[str, Any]]) -> str:
    """A short label of a proposal for tables: ``tool(order or product id)``, ``reply``,
    ``transfer_to_human``, ``end``, or ``malformed``. No personal data (emails, names,
    user ids) is shown."""
    if not proposal:
        return MALFORMED
    if proposal.get("kind") == "tool_call":
        tool = proposal.get("tool") or {}
        args = tool.get("arguments") or {}
        target = args.get("order_id") or args.get("product_id") or ""
        return f"{tool.get('name', '?')}({target})"
    if proposal.get("kind") == "tool_calls":
        return f"tool_calls({len(proposal.get('tools') or [])})"
    return str(proposal.get("kind", "?"))
