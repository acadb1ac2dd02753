"""The policy validator: pure functions that accept or reject a proposal given the state.

Every rejection names the policy clause it enforces (``Rule``, whose values are the
clause ids of ``workflows.domain.policy.text.POLICY_CLAUSES``). The generic gates come from a
tool's ``scope`` (authenticate first, one customer, read the order first, its status
precondition); the tool's own ``check`` follows. The workflow calls
``validate_proposal`` when the model proposes an action and ``validate_execution``
right before a consequential write runs, with the user's confirmation.
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel

from workflows.domain.actions import call_arguments, call_digest
from workflows.domain.policy.approvals import HANDED_TO_HUMAN, ApprovalStatus
from workflows.domain.catalogue import Scope, ToolSpec, spec_of
from workflows.domain.catalogue.checks import status_refusal
from workflows.domain.policy.clauses import PolicyViolation, Rule, require
from workflows.domain.policy.named_target import check_named_target
from workflows.domain.records import StepStatus
from workflows.domain.state import Confirmation, ConversationState, PendingConfirmation

__all__ = ["Rule", "Verdict", "validate_proposal", "validate_execution", "check_call"]


class Verdict(BaseModel):
    """Outcome of validation. ``rule`` and ``reason`` are set when rejected;
    ``needs_confirmation`` when the action is a write that must be confirmed first."""

    accepted: bool
    rule: Optional[Rule] = None
    reason: str = ""
    needs_confirmation: bool = False


ACCEPT = Verdict(accepted=True)


def _refuse(rule: Rule, reason: str) -> Verdict:
    return Verdict(accepted=False, rule=rule, reason=reason)


def validate_proposal(state: ConversationState, action: Any, named_target: bool = True) -> Verdict:
    """Check a ``ProposedAction`` against the policy and the state; ``named_target`` applies
    the named-target clause to writes (False only where a run of 1.0.0 replays without it).

    Returns an accepted verdict (``needs_confirmation`` for consequential writes) or a
    rejection with the rule. Never raises for a well-typed action.
    """
    if not state.is_open():
        return _refuse(Rule.CONVERSATION_CLOSED, "the conversation is closed")
    if action.kind != "tool_call":
        return ACCEPT
    spec = spec_of(action.tool.name)
    try:
        if spec.is_write and named_target:  # first: reading the wrong order would not make it right
            check_named_target(state, action.tool)
        check_call(state, action.tool)
    except PolicyViolation as violation:
        return _refuse(violation.rule, violation.reason)
    order_id = getattr(action.tool.arguments, "order_id", None)
    if spec.is_write and any(a.order_id == order_id for a in state.pending_approvals()):
        # one decision per order at a time: a supervisor decides on the write already waiting
        return _refuse(Rule.AWAITING_APPROVAL, f"a change to order {order_id} already awaits a supervisor's "
                                               "decision; wait for it before proposing another")
    return Verdict(accepted=True, needs_confirmation=spec.is_write)


def handed_over_refusal(state: ConversationState, action: Any) -> Optional[Verdict]:
    """A write proposed on an order whose earlier write in this conversation went to a human
    agent when its approval expired (its ticket opened): refused under approval-expired, since
    the human agent has that order's change and a second approval would be decided beside them.
    None for anything else (a read, another order, an expiry whose ticket could not be opened)."""
    if action.kind != "tool_call" or not spec_of(action.tool.name).is_write:
        return None
    order_id = getattr(action.tool.arguments, "order_id", None)
    handed = {s.step_id for s in state.steps if s.status is StepStatus.FAILED and (s.error or "").endswith(
        HANDED_TO_HUMAN)}
    if any(a.order_id == order_id and a.status is ApprovalStatus.EXPIRED and a.operation_id in handed
           for a in state.approvals):
        return _refuse(Rule.APPROVAL_EXPIRED, f"a change to order {order_id} is with a human agent since its "
                                              "approval expired; no other change to it is made here")
    return None


def validate_execution(
    state: ConversationState, pending: Optional[PendingConfirmation], confirmation: Optional[Confirmation]
) -> Verdict:
    """Check that a pending write may run now: the user said yes to this exact detail,
    after it was shown, and every precondition still holds on the current state.

    Clause: explicit-confirmation (plus all the write's own clauses, re-checked).
    """
    if pending is None:
        return _refuse(Rule.EXPLICIT_CONFIRMATION, "nothing is awaiting confirmation")
    if confirmation is None:
        return _refuse(Rule.EXPLICIT_CONFIRMATION, "a consequential write needs the user's explicit yes to its exact detail")
    if confirmation.digest != pending.digest or confirmation.digest != call_digest(pending.call):
        return _refuse(Rule.EXPLICIT_CONFIRMATION, "the user confirmed a different action detail than the one proposed")
    if confirmation.operation_id != pending.operation_id:
        return _refuse(Rule.EXPLICIT_CONFIRMATION,
                       "the user's yes was sent before this proposal was shown (it answered an earlier one)")
    if confirmation.turn <= pending.proposed_turn:
        return _refuse(Rule.EXPLICIT_CONFIRMATION, "the confirmation must come in a user turn after the detail was shown")
    if not state.is_open():
        return _refuse(Rule.CONVERSATION_CLOSED, "the conversation is closed")
    try:
        check_call(state, pending.call)
    except PolicyViolation as violation:
        return _refuse(violation.rule, violation.reason)
    return ACCEPT


def check_call(state: ConversationState, call: Any) -> None:
    """Run the scope gates and the tool's own check; raises ``PolicyViolation``."""
    spec = spec_of(call.name)
    args = call_arguments(call)
    if spec.scope is Scope.OPEN:
        return
    if spec.scope is Scope.IDENTIFY:
        _own_check(spec, state, args, None)
        return
    customer = state.customer
    require(customer is not None, Rule.AUTHENTICATE_FIRST,
            "authenticate the user by email or by name and zip code first (even if they gave a user id)")
    assert customer is not None
    if "user_id" in args:
        require(args["user_id"] == customer.user_id, Rule.ONE_CUSTOMER,
                f"user {args['user_id']} is not the authenticated customer")
    if "payment_method_id" in args:
        require(args["payment_method_id"] in customer.payment_methods, Rule.ONE_CUSTOMER,
                f"{args['payment_method_id']} is not one of the customer's payment methods (read the "
                "customer's details for their payment method ids)")
    if spec.scope is not Scope.ORDER:
        # CUSTOMER and ORDER_LOOKUP: the system of record answers scoped to the customer
        _own_check(spec, state, args, None)
        return
    order_id = args["order_id"]
    if customer.details_loaded:
        require(order_id in customer.order_ids, Rule.ONE_CUSTOMER, f"order {order_id} is not one of the customer's orders")
    order = state.orders.get(order_id)
    require(order is not None, Rule.CHECK_STATUS, f"read order {order_id} from the system of record before acting on it")
    assert order is not None
    require(order.user_id == customer.user_id, Rule.ONE_CUSTOMER, f"order {order_id} was not found for this customer")
    failed = status_refusal(spec.name, spec.status, order_id, order.status, len(order.payment_history))
    if failed is not None:
        raise PolicyViolation(*failed)
    # an order read cut to the record limits may miss items or payments: its amounts are unknown
    require(not order.cut, Rule.CHECK_STATUS,
            f"order {order_id} is too large to be read whole ({order.cut[0] if order.cut else ''}); "
            "it cannot be changed here: offer a transfer to a human agent")
    _own_check(spec, state, args, order)


def _own_check(spec: ToolSpec, state: ConversationState, args: dict[str, Any], order: Any) -> None:
    if spec.check is not None:
        spec.check(state, args, order)
