"""Why a proposal can be refused: policy clause ids, and the violation that carries one.

``Rule`` values are the clause ids of ``workflows.domain.policy.text.POLICY_CLAUSES`` (plus a few
protocol reasons that are not clauses). Per-tool checks in the catalogue raise
``PolicyViolation``; ``workflows.domain.policy.validator`` turns it into a ``Verdict``.
"""

from __future__ import annotations

from enum import Enum


class Rule(str, Enum):
    """Why a proposal was rejected: a policy clause id, or a protocol problem."""

    AUTHENTICATE_FIRST = "authenticate-first"
    ONE_CUSTOMER = "one-customer"
    EXPLICIT_CONFIRMATION = "explicit-confirmation"
    CHECK_STATUS = "check-status"
    CANCEL_PENDING_ONLY = "cancel-pending-only"
    MODIFY_PENDING_ONLY = "modify-pending-only"
    MODIFY_PAYMENT = "modify-payment"
    ITEM_CHANGE_ONCE = "item-change-once"
    SAME_PRODUCT_VARIANT = "same-product-variant"
    PRICE_DIFFERENCE_PAYMENT = "price-difference-payment"
    RETURN_DELIVERED_ONLY = "return-delivered-only"
    EXCHANGE_DELIVERED_ONLY = "exchange-delivered-only"
    GOODWILL_CREDIT = "goodwill-credit"
    NAMED_TARGET = "named-target"
    ONE_ACTION = "one-action"
    CONVERSATION_CLOSED = "conversation-closed"
    MALFORMED_OUTPUT = "malformed-model-output"
    TOOL_ERROR = "tool-error"
    USER_DECLINED = "user-declined"
    SUPERSEDED = "superseded-by-newer-message"
    APPROVAL_REJECTED = "approval-rejected"
    APPROVAL_EXPIRED = "approval-expired"
    AWAITING_APPROVAL = "awaiting-approval"
    CANCELLED = "conversation-cancelled"
    MEMORY_FACT = "memory-fact"
    """A fact the memory may not keep (``workflows.domain.memory.fact_problem``, the user's own words)."""


class PolicyViolation(Exception):
    """Raised by a check: the first failed clause (``rule``) and the reason, written for
    the model (it may name ids the model already knows; users never see it)."""

    def __init__(self, rule: Rule, reason: str) -> None:
        super().__init__(reason)
        self.rule = rule
        self.reason = reason


def require(condition: bool, rule: Rule, reason: str) -> None:
    """Raise ``PolicyViolation(rule, reason)`` unless ``condition`` holds."""
    if not condition:
        raise PolicyViolation(rule, reason)
