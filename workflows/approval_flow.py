"""Supervisor approvals inside a conversation (workflow code, deterministic).

After the user's yes, a refund-type write that needs a supervisor
(``workflows.approvals.required_approval``, on the conversation's typed order) is not
run: its approval is recorded, its step becomes ``awaiting_approval`` and the user is
told at once. The conversation keeps serving messages. When a supervisor decides (the
``decide_approval`` update) or the approval's durable timer runs out, the main loop
settles it outside any user turn: approved → the write runs (its refund child is told
who approved, so it does not ask again); rejected → nothing is written; expired → a
human ticket is opened. The user is told each outcome (an assistant turn, and the
start of the reply to their next message).
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable, Optional

from temporalio import workflow

from workflows import keys, replies
from workflows import transitions as tr
from workflows.approvals import (
    Approval,
    ApprovalPolicy,
    ApprovalStatus,
    expire,
    expiry_ticket_summary,
    open_approval,
    required_approval,
    variant_prices,
)
from workflows.catalogue import spec_of
from workflows.clauses import Rule
from workflows.contracts import CancelRequest
from workflows.execute import execute_confirmed, open_ticket
from workflows.journal import Verdict
from workflows.journal_log import JournalLog
from workflows.state import ConversationState, PendingConfirmation, StepStatus
from workflows.visibility import Visibility


def request_approval(state: ConversationState, confirmed: PendingConfirmation, policy: ApprovalPolicy,
                     workflow_id: str, now: datetime) -> Optional[Approval]:
    """Record the approval ``confirmed`` needs and park it; None when it needs none (or
    the order was never read, which the policy's check-status already refuses)."""
    if spec_of(confirmed.call.name).approval_amount is None:
        return None
    order = state.orders.get(getattr(confirmed.call.arguments, "order_id", ""))
    if order is None:
        return None
    needed = required_approval(confirmed.call, order, policy, variant_prices(state.products))
    if needed is None:
        return None
    amount, reasons = needed
    approval = open_approval(workflow_id, confirmed.operation_id, confirmed.call, order, amount, reasons, now, policy)
    tr.await_approval(state, confirmed, approval)
    return approval


def next_expiry(state: ConversationState) -> Optional[datetime]:
    """When the earliest pending approval expires, if any is pending."""
    pending = state.pending_approvals()
    return min(a.expires_at for a in pending) if pending else None


def ready_to_settle(state: ConversationState, now: datetime) -> bool:
    """True when a parked write's approval was decided or has run out of time."""
    return any(a.status is not ApprovalStatus.PENDING or now >= a.expires_at
               for a in state.approvals if any(c.operation_id == a.operation_id for c in state.awaiting_approval))


async def settle_approvals(state: ConversationState, policy: ApprovalPolicy, write_timeout_seconds: float,
                           visibility: Visibility, cancel_requested: Callable[[], Optional[CancelRequest]],
                           journal: Optional[JournalLog] = None) -> list[str]:
    """Act on every decided or expired approval; returns what to tell the user, one
    sentence per write, and notes each write's verdict in ``journal``. Raises
    ``Interrupted`` when a cancel arrives before an approved write starts (it then never
    starts)."""
    now = workflow.now()
    for approval in state.pending_approvals():
        if now >= approval.expires_at:
            expire(approval, now)
    told = []
    for confirmed, approval in tr.take_settled(state):
        if approval.status is ApprovalStatus.APPROVED:
            try:
                ended = await execute_confirmed(state, confirmed, write_timeout_seconds, visibility,
                                                cancel_requested, approvals=policy, approved_by=approval.approver)
            finally:
                if journal is not None:
                    journal.write_done(state, confirmed)
            told.append(ended or replies.approved(confirmed.detail, _outcome(state, confirmed)))
            if not state.is_open():
                break
        elif approval.status is ApprovalStatus.REJECTED:
            reason = f"a supervisor rejected it ({approval.approver})"
            tr.decline(state, confirmed, Rule.APPROVAL_REJECTED.value, f"{reason}: {confirmed.detail}")
            if journal is not None:
                journal.write_verdict(confirmed, Verdict.DECLINED, Rule.APPROVAL_REJECTED.value, reason)
            told.append(replies.approval_rejected(confirmed.detail))
        else:
            reason = "the approval expired undecided; handed to a human agent"
            tr.finish_step(state, confirmed.operation_id, StepStatus.FAILED, reason)
            if journal is not None:
                journal.write_verdict(confirmed, Verdict.DECLINED, Rule.APPROVAL_EXPIRED.value, reason)
            write_key = keys.idempotency_key(confirmed.call, confirmed.operation_id)
            await open_ticket(state, expiry_ticket_summary(approval), keys.approval_expiry_ticket_key(write_key))
            told.append(replies.approval_expired(confirmed.detail))
    visibility.publish(state)
    return told


def _outcome(state: ConversationState, confirmed: PendingConfirmation) -> Optional[str]:
    """None when the write applied, else the system's refusal (for the model, not the user)."""
    op = next((o for o in reversed(state.completed_operations) if o.operation_id == confirmed.operation_id), None)
    return None if op is not None and op.ok else (op.result if op else "not run")
