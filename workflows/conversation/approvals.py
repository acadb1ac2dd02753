"""Supervisor approvals inside a conversation (workflow code, deterministic).

After the user's yes, a refund-type write that needs a supervisor
(``workflows.domain.policy.approvals.required_approval``, on the conversation's typed order) is not
run: its approval is recorded, its step becomes ``awaiting_approval`` and the user is
told at once. The conversation keeps serving messages. When a supervisor decides (the
``decide_approval`` update) or the approval's durable timer runs out, the main loop
settles it outside any user turn: approved → the write runs (its refund child is told
who approved, so it does not ask again); rejected → nothing is written; expired → a
human ticket is opened. The user is told each outcome (an assistant turn, and the
start of the reply to their next message).

Before a write is parked, the ledger is asked by its key (``recorded_before_approval``):
a reset to before the user's yes re-executes it, and a write that a supervisor approved and
that applied in the first run is recorded as applied, never parked for a second decision
whose rejection, expiry or cancel would tell the user it was not made. Likewise the
ticketing system is asked for the write's approval-expiry ticket before it is parked
(``handed_over``): a write whose approval expired in an earlier run is a human agent's, and a
reset that re-executes its yes never parks it for a supervisor who could approve it beside
them. That look-up fails closed: when the ticketing system cannot answer (after its bounded
retries), the write is neither parked nor run, and the user is told it could not be checked.
(A reset to after the yes keeps the approval's ``expires_at`` in the state, so it expires again
at once and cannot be approved.) Such a reset also puts an approval that was
decided after it back to pending, though the write may have applied in the first run: before
a rejected or expired approval tells the user nothing was changed, the ledger is asked by the
write's key (``settle_approvals``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable, Optional

from temporalio import workflow
from temporalio.exceptions import ActivityError

from workflows.domain import keys, replies
from workflows.domain import transitions as tr
from workflows.domain.policy.approvals import (
    HANDED_TO_HUMAN,
    TICKET_LOOKUP_PATCH,
    Approval,
    ApprovalPolicy,
    ApprovalStatus,
    expiry_ticket_summary,
    open_approval,
    required_approval,
    variant_prices,
)
from workflows.activity_api import ToolActivitiesApi
from workflows.domain.catalogue import spec_of
from workflows.domain.policy.clauses import Rule
from workflows.domain.contracts import CancelRequest, TicketLookup, ToolResult, WriteToolRequest
from workflows.conversation.cancellation import escalated_with_cancel
from workflows.conversation.execute import execute_confirmed, open_ticket
from workflows.ledger_lookup import recorded_under
from workflows.options import HEARTBEAT_TIMEOUT, READ_RETRY, READ_TIMEOUT
from workflows.domain.state import ConversationState, PendingConfirmation, StepStatus


NO_TICKET = "the approval expired undecided; no human-agent ticket could be opened"
"""The step's error when the expiry's ticket could not be opened."""
RAN_EARLIER = "the write had already run in an earlier run of this conversation (ledger)"
"""Added to an approval's note when the ledger, asked before a rejected or expired approval is
settled, finds its write applied."""
HANDED_OVER = f"the approval expired undecided in an earlier run; {HANDED_TO_HUMAN}"
"""The step's error when ``handed_over`` finds the write already with a human agent."""
UNCHECKED = ("the ticketing system could not be asked whether a human agent already has this write; it was "
             "neither parked for a supervisor nor run")
"""The step's error when ``handed_over`` could not ask (the ticketing system down past its retries)."""


def needs_approval(state: ConversationState, confirmed: PendingConfirmation, policy: ApprovalPolicy) -> bool:
    """True when ``request_approval`` would park ``confirmed`` (pure; nothing recorded)."""
    if spec_of(confirmed.call.name).approval_amount is None:
        return False
    order = state.orders.get(getattr(confirmed.call.arguments, "order_id", ""))
    return order is not None and required_approval(confirmed.call, order, policy,
                                                   variant_prices(state.products)) is not None


async def recorded_before_approval(state: ConversationState, confirmed: PendingConfirmation,
                                   policy: ApprovalPolicy) -> Optional[ToolResult]:
    """The ledger's result for a write that needs a supervisor and already holds one under
    its key (a reset re-executed the yes of a write that was approved and ran), else None.
    Asks only for writes that need approval; a failed lookup returns None (the write is parked,
    and its refund child asks the ledger first once approved)."""
    if not needs_approval(state, confirmed, policy):
        return None
    return await _recorded(state, confirmed, "before asking a supervisor")


async def _recorded(state: ConversationState, confirmed: PendingConfirmation, when: str) -> Optional[ToolResult]:
    """The ledger's result under ``confirmed``'s key, or None (none held, or the look-up failed)."""
    call = confirmed.call
    request = WriteToolRequest(store=state.store, call=call, system_of_record=state.system_of_record,
                               idempotency_key=keys.idempotency_key(call, confirmed.operation_id))
    return await recorded_under(request, f"ask the ledger for {call.name} {when}")


async def handed_over(state: ConversationState, confirmed: PendingConfirmation,
                      policy: ApprovalPolicy) -> Optional[bool]:
    """True when an earlier run of this conversation handed ``confirmed`` to a human agent:
    the ticketing system holds its approval-expiry ticket (``keys.approval_expiry_ticket_key``).
    A reset restarts an approval's timer, so without this the re-executed yes parks the write
    again and a supervisor may approve what a human agent already has. When True, the write has
    failed with ``HANDED_OVER``: the caller tells the user ``replies.already_handed_over`` and
    runs nothing.

    Asks only for writes that need approval (False for others). None when the ticketing system
    could not be asked (its retries, ``READ_RETRY``, ran out): it fails closed, since "no
    ticket" is not known; the write has failed with ``UNCHECKED`` and the caller tells the user
    ``replies.hand_off_unchecked`` and neither parks nor runs it."""
    if not needs_approval(state, confirmed, policy):
        return False
    ticket = keys.approval_expiry_ticket_key(keys.idempotency_key(confirmed.call, confirmed.operation_id))
    try:
        found = await workflow.execute_activity_method(
            ToolActivitiesApi.find_ticket, TicketLookup(store=state.store, ticket_key=ticket),
            heartbeat_timeout=HEARTBEAT_TIMEOUT, start_to_close_timeout=READ_TIMEOUT, retry_policy=READ_RETRY,
            summary="ask the ticketing system whether a human agent already has this write",
        )
    except ActivityError as err:
        workflow.logger.warning("ticket lookup before approval failed: %s", type(err.cause).__name__)
        if not workflow.patched(TICKET_LOOKUP_PATCH):
            return False
        tr.fail_write(state, confirmed, Rule.TOOL_ERROR.value, UNCHECKED)
        return None
    if found:
        tr.fail_write(state, confirmed, Rule.APPROVAL_EXPIRED.value, HANDED_OVER)
    return found


async def request_supervisor(state: ConversationState, confirmed: PendingConfirmation, policy: ApprovalPolicy,
                             workflow_id: str, now: datetime) -> Optional[str]:
    """The user confirmed a write that needs a supervisor (``needs_approval``): park it for
    one (``request_approval``) and return what the user is told. Unless an earlier run settled
    it (a reset re-executed this yes): the ledger's result is recorded as its outcome and None
    returned (the model is asked what to say), or, when it is with a human agent already
    (``handed_over``), the user is told so; when the ticketing system could not say whether it
    is, nothing is parked or run and the user is told that (``replies.hand_off_unchecked``)."""
    recorded = await recorded_before_approval(state, confirmed, policy)
    if recorded is not None:  # the write ran, approved, in the first run
        record_recorded(state, confirmed, recorded)
        return None
    handed = await handed_over(state, confirmed, policy)
    if handed is None:  # the ticketing system could not say: fails closed
        return replies.hand_off_unchecked(confirmed.detail)
    if handed:  # its approval expired in a run before
        return replies.already_handed_over(confirmed.detail)
    request_approval(state, confirmed, policy, workflow_id, now)
    return replies.awaiting_approval(confirmed.detail)


def record_recorded(state: ConversationState, confirmed: PendingConfirmation, recorded: ToolResult) -> None:
    """Record the ledger's result for ``confirmed`` as its outcome (replayed, no before-image)."""
    call, operation = confirmed.call, confirmed.operation_id
    child = keys.refund_workflow_id(state.store, getattr(call.arguments, "order_id", ""), operation)
    tr.apply_write_result(state, call, operation, keys.idempotency_key(call, operation), recorded.result,
                          recorded.ok, child, None)


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
                           cancel_requested: Callable[[], Optional[CancelRequest]]) -> list[str]:
    """Act on every decided or expired approval; returns what to tell the user, one
    sentence per write. Raises ``Interrupted`` when a cancel arrives before an approved
    write starts (it then never starts)."""
    tr.expire_approvals(state, workflow.now())
    told: list[str] = []
    # each leaves the awaiting writes when settled: an escalation withdraws (and tells) the rest
    for confirmed, approval in tr.decided_writes(state):
        tr.take_awaiting(state, confirmed)
        if approval.status is not ApprovalStatus.APPROVED:
            # a reset to after the yes undid a decision whose write ran: it is not "nothing changed"
            recorded = await _recorded(state, confirmed, "before telling the user it was not made")
            if recorded is not None:
                record_recorded(state, confirmed, recorded)
                tr.note_ran_earlier(approval, RAN_EARLIER)
                told.append(replies.made_earlier(confirmed.detail, None if recorded.ok else recorded.result))
                continue
        if approval.status is ApprovalStatus.APPROVED:
            ended = await execute_confirmed(state, confirmed, write_timeout_seconds, cancel_requested,
                                            approvals=policy, approved_by=approval.approver)
            told.append(ended or replies.approved(confirmed.detail, _outcome(state, confirmed)))
            if not state.is_open():
                if ended is not None:  # escalated: a cancel that arrived meanwhile is honoured too
                    told[-1] = await escalated_with_cancel(state, cancel_requested(), ended, write_timeout_seconds)
                break
        elif approval.status is ApprovalStatus.REJECTED:
            tr.decline(state, confirmed, Rule.APPROVAL_REJECTED.value, f"a supervisor rejected it ({approval.approver})",
                       quote_detail=True)
            told.append(replies.approval_rejected(confirmed.detail))
        else:
            # the step fails at once; the reason says whether a human agent has it once the ticket is asked for
            reason = f"the approval expired undecided; {HANDED_TO_HUMAN}"
            tr.finish_step(state, confirmed.operation_id, StepStatus.FAILED, reason)
            write_key = keys.idempotency_key(confirmed.call, confirmed.operation_id)
            opened = await open_ticket(state, expiry_ticket_summary(approval),
                                       keys.approval_expiry_ticket_key(write_key), confirmed.operation_id)
            tr.fail_write(state, confirmed, Rule.APPROVAL_EXPIRED.value, reason if opened else NO_TICKET)
            # no human has it without a ticket: none is promised
            told.append(replies.approval_expired(confirmed.detail) if opened
                        else replies.approval_expired_without_ticket(confirmed.detail))
    return told


def _outcome(state: ConversationState, confirmed: PendingConfirmation) -> Optional[str]:
    """None when the write applied, else the system's refusal (for the model, not the user)."""
    op = next((o for o in reversed(state.completed_operations) if o.operation_id == confirmed.operation_id), None)
    return None if op is not None and op.ok else (op.result if op else "not run")
