"""Supervisor approvals of refund-type writes: when one is needed, the record of one,
and whether a supervisor's decision may be applied to it.

A refund-type write (``Execution.REFUND_WORKFLOW`` in the catalogue) waits for a
supervisor when either rule below holds. The money it moves is the spec's
``approval_amount`` (decimal currency, from the typed ``OrderFact``; see
``workflows.domain.catalogue.amounts``).

- ``approval-threshold`` (statekeeper's rule, configurable): the amount is above
  ``ApprovalPolicy.threshold`` (default 500.00; exactly 500.00 does not need approval).
- ``refund-elsewhere`` (policy flag): money refunded to a payment method that did not pay
  for the order, above ``ApprovalPolicy.refund_elsewhere_threshold`` (default 100.00). The
  τ-bench policy allows such a refund only to one of the customer's gift cards
  (clause return-delivered-only; the price difference of an item change likewise,
  price-difference-payment), and gift-card refunds are credited at once
  (cancel-pending-only), so the money cannot be recalled if the return never arrives.
- ``repeat-refund`` (policy flag): the write refunds money (the spec's ``refunds``: a cancel,
  a payment change, a return, an item change to cheaper items) and the order's payment
  history already holds a refund: a second refund on one order (the τ-bench policy sends a cancel after a
  payment change to a human for the same reason, cancel-pending-only).

An approval is bound to one exact operation: its id is derived from the workflow id, the
operation id and the digest of the call's arguments (``workflows.domain.actions.call_digest``),
so a decision naming another operation or other arguments finds nothing and is refused.

Pure and deterministic (no clock: callers pass ``workflow.now()``); imported inside the
workflow sandbox by ``SupportWorkflow`` and ``RefundWorkflow``.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta
from decimal import Decimal
from enum import Enum
from typing import Any, Literal, Mapping, Optional
from urllib.parse import quote, unquote

from pydantic import BaseModel, ConfigDict, Field
from temporalio.exceptions import ApplicationError

from workflows.domain.actions import call_digest
from workflows.domain.catalogue import spec_of
from workflows.domain.catalogue.amounts import MissingPrice, money
from workflows.domain.errors import ErrorType
from workflows.domain.records import OrderFact
from workflows.domain.user_text import control_problem

APPROVER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]*$"
"""A supervisor's id: ASCII, URL-path safe, no spaces (it is shown in the state and the Web UI)."""
_SEPARATOR = "~"
_BOUND = re.compile(r"[0-9a-f]{12}")
_ENCODED = re.compile(r"[A-Za-z0-9._:@%~-]+")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
MAX_APPROVAL_ID = 1100


HANDED_TO_HUMAN = "handed to a human agent"
"""How the step of a write whose approval expired and whose ticket opened ends its error: a
human agent has that order's change (``policy.handed_over_refusal``)."""
TICKET_LOOKUP_PATCH = "ticket-lookup-fails-closed"
"""``workflow.patched`` id of the look-up of a write's approval-expiry ticket before it is parked
for a supervisor, failing closed (``workflows.conversation.approvals.handed_over``,
``workflows.refund.approval_gate``): runs of 1.0.0 replay a conversation's failed look-up as "no
ticket" and park the write, and a refund's gate without the look-up (docs/releasing.md)."""


class ApprovalStatus(str, Enum):
    """Where an approval stands: waiting, or decided (approved/rejected), or expired undecided."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    WITHDRAWN = "withdrawn"
    """The process was cancelled (ended, transferred, escalated) before a supervisor decided,
    or after an approval but before the approved write ran (the approver stays on record)."""


class ApprovalPolicy(BaseModel):
    """When refund-type writes wait for a supervisor, and for how long. Carried in
    ``SupportInput.approvals`` and ``RefundInput.approvals``; the client sets it from
    ``Settings.approval_threshold`` / ``approval_timeout_seconds`` (workflows never read the
    environment). ``threshold`` and ``refund_elsewhere_threshold`` are decimal currency;
    ``timeout_seconds`` is how long an approval waits before it is escalated to a human."""

    threshold: Decimal = Field(default=Decimal("500.00"), ge=0)
    timeout_seconds: float = Field(default=86400.0, gt=0, le=366 * 86400.0)
    refund_elsewhere_threshold: Decimal = Field(default=Decimal("100.00"), ge=0)


class Approval(BaseModel):
    """One approval request and, once decided, its decision. ``amount`` is decimal
    currency; ``reasons`` say why approval is needed, each prefixed with its rule
    (``[approval-threshold] ...``). Times are the workflow's clock (UTC). A record of the
    conversation state: unknown fields are refused (``workflows.domain.records.Record``)."""

    model_config = ConfigDict(extra="forbid")

    approval_id: str
    workflow_id: str
    operation_id: str
    digest: str
    tool: str
    order_id: str
    amount: Decimal
    reasons: list[str]
    requested_at: datetime
    expires_at: datetime
    status: ApprovalStatus = ApprovalStatus.PENDING
    approver: Optional[str] = None
    decided_at: Optional[datetime] = None
    note: Optional[str] = None


class ApprovalDecision(BaseModel):
    """Input of the ``decide_approval`` update (``SupportWorkflow`` and ``RefundWorkflow``):
    approve or reject one approval, by a named supervisor."""

    approval_id: str = Field(min_length=1, max_length=MAX_APPROVAL_ID)
    decision: Literal["approve", "reject"]
    approver: str = Field(min_length=1, max_length=128, pattern=APPROVER_PATTERN)
    note: Optional[str] = Field(default=None, max_length=1000)


def approval_id_for(workflow_id: str, operation_id: str, digest: str) -> str:
    """``<workflow_id>~<12 hex of sha256(operation_id|digest)>``: names the process that
    waits (so the client can find it) and binds the exact operation and arguments. The
    workflow id is percent-encoded where it holds characters outside
    ``[A-Za-z0-9._:@~-]``, so the id is safe in a URL path."""
    bound = hashlib.sha256(f"{operation_id}|{digest}".encode()).hexdigest()[:12]
    return f"{quote(workflow_id, safe=':@')}{_SEPARATOR}{bound}"


def workflow_id_of(approval_id: str) -> str:
    """The workflow id an approval id names. Raises ``ValueError`` for an id that
    ``approval_id_for`` cannot have made (wrong shape, too long, bad escapes)."""
    encoded, separator, bound = approval_id.rpartition(_SEPARATOR)
    if (len(approval_id) > MAX_APPROVAL_ID or not separator or not _BOUND.fullmatch(bound)
            or not _ENCODED.fullmatch(encoded) or _BAD_ESCAPE.search(encoded)):
        raise ValueError("malformed approval id: expected <workflow id>~<12 hex digits>")
    try:
        return unquote(encoded, errors="strict")
    except UnicodeDecodeError as err:
        raise ValueError("malformed approval id: its escapes are not UTF-8") from err


def required_approval(call: Any, order: OrderFact, policy: ApprovalPolicy,
                      prices: Optional[Mapping[str, Decimal]] = None) -> Optional[tuple[Decimal, list[str]]]:
    """``(amount, reasons)`` when ``call`` must wait for a supervisor, else None.

    ``order`` is the typed order as just read from the system of record; ``prices`` maps
    item ids of new variants to their price (decimal currency), needed by item changes
    (``variant_prices`` builds it from product facts). Only tools with an
    ``approval_amount`` in the catalogue (the refund-type writes) can need approval. The
    rules are in the module docstring. A new item whose price is unknown cannot be
    judged, so it needs approval (fail closed) with the amount of the known items."""
    spec = spec_of(call.name)
    if spec.approval_amount is None:
        return None
    args = call.arguments.model_dump(mode="json")
    reasons: list[str] = []
    try:
        amount = spec.approval_amount(order, args, prices or {})
    except MissingPrice as err:
        amount = err.known
        reasons.append(f"[unknown-price] the price of new item {err.item_id} is unknown, so the price "
                       "difference cannot be judged")
    if amount > policy.threshold:
        reasons.append(f"[approval-threshold] {money(amount)} is above the approval threshold of "
                       f"{money(policy.threshold)}")
    refunds = spec.refunds is not None and spec.refunds(order, args, prices or {})
    destination = args.get(spec.refund_destination) if spec.refund_destination else None
    original = order.payment_method_ids[0] if order.payment_method_ids else None
    if (destination is not None and destination != original and refunds
            and amount > policy.refund_elsewhere_threshold):
        reasons.append(f"[refund-elsewhere] {money(amount)} is refunded to a payment method that did not pay "
                       "for the order (a gift card, credited at once), above "
                       f"{money(policy.refund_elsewhere_threshold)} (clauses return-delivered-only, "
                       "price-difference-payment)")
    if any(entry.transaction_type == "refund" for entry in order.payment_history) and refunds:
        reasons.append("[repeat-refund] the order already had money refunded once; a second refund on the "
                       "same order needs a supervisor (clause cancel-pending-only)")
    return (amount, reasons) if reasons else None


def variant_prices(products: Mapping[str, Any]) -> dict[str, Decimal]:
    """Item id → price (decimal currency) of every variant of ``products`` (a mapping of
    ``ProductFact``, e.g. ``ConversationState.products``)."""
    return {item_id: money(variant.price)
            for product in products.values() for item_id, variant in product.variants.items()}


def open_approval(workflow_id: str, operation_id: str, call: Any, order: OrderFact, amount: Decimal,
                  reasons: list[str], now: datetime, policy: ApprovalPolicy) -> Approval:
    """A pending approval of ``call`` (operation ``operation_id`` of ``workflow_id``),
    requested at ``now`` and expiring ``policy.timeout_seconds`` later."""
    digest = call_digest(call)
    return Approval(
        approval_id=approval_id_for(workflow_id, operation_id, digest), workflow_id=workflow_id,
        operation_id=operation_id, digest=digest, tool=call.name, order_id=order.order_id,
        amount=money(amount), reasons=list(reasons), requested_at=now,
        expires_at=now + timedelta(seconds=policy.timeout_seconds),
    )


def _refused(message: str) -> ApplicationError:
    return ApplicationError(message, type=ErrorType.APPROVAL_REFUSED.value, non_retryable=True)


def _unknown(message: str) -> ApplicationError:
    return ApplicationError(message, type=ErrorType.APPROVAL_UNKNOWN.value, non_retryable=True)


def _when(moment: Optional[datetime]) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "an unknown time"


def check_decision(approvals: list[Approval], decision: ApprovalDecision, now: datetime) -> Approval:
    """The pending approval ``decision`` may decide. Raises ``ApplicationError(non_retryable=True)``
    of type ``APPROVAL_UNKNOWN`` when the id matches no approval this process issued (an id for
    another operation or other arguments included), of type ``APPROVAL_REFUSED`` when the approval
    was already decided (naming by whom and when), withdrawn or expired. Changes nothing."""
    approval = next((a for a in approvals if a.approval_id == decision.approval_id), None)
    if approval is None:
        if any(a.status is ApprovalStatus.PENDING for a in approvals):
            raise _unknown("this approval id does not match the operation awaiting approval here: an approval "
                           "is bound to one exact operation and its arguments")
        raise _unknown("no operation with this approval id is awaiting approval here")
    if approval.status is ApprovalStatus.EXPIRED or (approval.status is ApprovalStatus.PENDING
                                                      and now >= approval.expires_at):
        raise _refused(f"this approval expired at {_when(approval.expires_at)} undecided and was handed to a "
                       "human agent; it can no longer be decided")
    if approval.status is ApprovalStatus.WITHDRAWN:
        raise _refused("this approval was withdrawn: the process was cancelled before a decision")
    if approval.status is not ApprovalStatus.PENDING:
        raise _refused(f"this approval was already {approval.status.value} by {approval.approver} at "
                       f"{_when(approval.decided_at)}; a decision cannot be changed")
    return approval


def check_decision_text(decision: ApprovalDecision) -> None:
    """Refuse (``ApprovalRefused``, non-retryable) a decision whose note has a control
    character (``workflows.domain.user_text``): for the update validators, the last edge before the
    state and history (the client and the API refuse it too; a caller of Temporal itself
    does not pass through them). Not in ``check_decision``: the handler re-runs that on replay."""
    problem = control_problem(decision.note, "the note") if decision.note else None
    if problem is not None:
        raise _refused(problem)


def apply_decision(approval: Approval, decision: ApprovalDecision, now: datetime) -> None:
    """Record ``decision`` on ``approval`` (status, approver, time, note). Call
    ``check_decision`` first; raises ``ValueError`` if ``approval`` is not the pending
    approval the decision names."""
    if approval.approval_id != decision.approval_id or approval.status is not ApprovalStatus.PENDING:
        raise ValueError("decision does not apply to this approval")
    approval.status = ApprovalStatus.APPROVED if decision.decision == "approve" else ApprovalStatus.REJECTED
    approval.approver = decision.approver
    approval.decided_at = now
    approval.note = decision.note


def expiry_ticket_summary(approval: Approval) -> str:
    """What the human ticket of an expired ``approval`` says (ids and amounts, no personal data)."""
    return (f"Approval of {approval.tool} on order {approval.order_id} for {approval.amount} expired undecided "
            f"({'; '.join(approval.reasons)}). Decide and act by hand.")


_RULE_PREFIX = re.compile(r"^\[[a-z0-9-]+\]\s*", re.ASCII)
_CLAUSE_NOTE = re.compile(r"\s*\(clauses? [a-z0-9-]+(?:, [a-z0-9-]+)*\)", re.ASCII)


def plain_reason(reasons: list[str]) -> str:
    """Why ``reasons`` need a supervisor, in plain words for a person: one sentence per reason,
    without its rule's tag (``[approval-threshold]``) and policy-clause references. The rules
    are documented (docs/concepts.md); the sentences say the same thing in words."""
    sentences = []
    for reason in reasons:
        words = _CLAUSE_NOTE.sub("", _RULE_PREFIX.sub("", reason)).strip().rstrip(".")
        if words:
            sentences.append(words[:1].upper() + words[1:] + ".")
    return " ".join(sentences)


_METHOD_KIND = re.compile(r"_?[0-9]+$")


def public_detail(detail: str, methods: Mapping[str, str]) -> str:
    """``detail`` (the sentence a user confirmed) for a supervisor: word for word, except each
    payment method id of ``methods`` (id -> what the customer sees of it, "visa ending 1234",
    or "" when unknown), which becomes that display, else its kind ("gift card"): payment
    method ids are personal data. The display the detail writes in brackets after an id
    ("gift_card_1 (gift card (balance 10.00))") stands for both, not repeated."""
    for method_id in sorted(methods, key=len, reverse=True):
        if not method_id or method_id not in detail:
            continue
        kind = _METHOD_KIND.sub("", method_id).replace("_", " ") or "a payment method"
        detail = re.sub(re.escape(method_id) + r"(?: \(((?:[^()]|\([^()]*\))*)\))?",
                        lambda found, kind=kind, known=methods[method_id]: known or found.group(1) or kind, detail)
    return detail


def expire(approval: Approval, now: datetime) -> None:
    """Mark a still-pending ``approval`` expired at ``now`` (its timer fired undecided)."""
    if approval.status is ApprovalStatus.PENDING:
        approval.status = ApprovalStatus.EXPIRED
        approval.decided_at = now
