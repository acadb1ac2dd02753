"""The cancel path of a conversation, by tool class, and the summary the user receives.

Rule (README, "Cancellation"): a cancel — the ``cancel`` signal, or Temporal's own
cancellation (the Web UI's "Request Cancellation") — stops the conversation at the next
safe point. An in-flight model call or read is cancelled. A write in flight is awaited,
never abandoned: its outcome is recorded (an unknown outcome is escalated, as always).
Reversible writes already done are kept and reported, unless the cancel asks for a
rollback: then each is undone by its compensation, newest first. Every other step
becomes cancelled. Nothing new starts after a cancel except those compensations and
that escalation. The user receives a summary of exactly what happened.
"""

from __future__ import annotations

from typing import Optional

from workflows.domain import keys, replies
from workflows.domain import transitions as tr
from workflows.conversation.compensation import roll_back
from workflows.domain.contracts import CancelRequest
from workflows.conversation.execute import open_ticket
from workflows.domain.state import ConversationState, ConversationStatus, StepStatus


async def cancel_conversation(state: ConversationState, request: CancelRequest, write_timeout_seconds: float) -> str:
    """Close ``state`` as cancelled (after the rollback, if asked) and return the summary
    for the user. Idempotent on an already closed state (returns the summary again)."""
    not_undone: list[str] = []
    if state.is_open():
        if request.rollback:
            not_undone = await _roll_back(state, write_timeout_seconds)
        tr.close(state, ConversationStatus.CANCELLED, request.reason)
    return summary(state, not_undone)


async def _roll_back(state: ConversationState, write_timeout_seconds: float) -> list[str]:
    """Undo the reversible writes (``roll_back``); what could not be undone goes to a human."""
    not_undone = await roll_back(state, write_timeout_seconds)
    if not_undone:
        # a human must look at what the rollback could not restore: one ticket per cancel
        await open_ticket(state, "Rollback after a cancel could not undo: " + "; ".join(not_undone),
                          keys.rollback_ticket_key(state.conversation_id))
    return not_undone


async def escalated_with_cancel(state: ConversationState, request: Optional[CancelRequest], reply: str,
                                write_timeout_seconds: float) -> str:
    """The reply to a turn (or a settled approval) that ended escalated or transferred: prefixed
    with the cancel's summary, and the cancel's reason added to ``state.ended_reason``, when a
    cancel was pending; ``reply`` unchanged otherwise (the status stays: a human must check the
    write, or has the case).

    A write whose outcome turned out unknown while a cancel was pending is still escalated (the
    one thing a cancel lets start); a transfer to a human agent (or a hand-over at the token
    budget) whose ticket opened while a cancel arrived stays ``transferred``. Either way the
    user's reply and the state also say that the conversation was cancelled, and a cancel
    asking for a rollback undoes the reversible writes after the escalation or transfer."""
    if request is None or state.status not in (ConversationStatus.ESCALATED, ConversationStatus.TRANSFERRED):
        return reply
    not_undone: list[str] = []
    if request.rollback:
        not_undone = await _roll_back(state, write_timeout_seconds)
    tr.note_cancel(state, request.reason)
    return f"{summary(state, not_undone)} {reply}"


def summary(state: ConversationState, not_undone: list[str]) -> str:
    """What happened, step by step, in the user's words: changes made and kept, changes
    undone, changes that could not be undone, and changes that were not made."""
    def details(status: StepStatus) -> list[str]:  # each once: a detail proposed again is one request
        return list(dict.fromkeys(step.detail or step.name for step in state.steps if step.status == status))

    parts = [replies.CANCELLED]
    kept = [d for d in details(StepStatus.DONE) if d not in not_undone]
    for label, items in (("Done", kept), ("Undone", details(StepStatus.COMPENSATED)),
                         ("Done but could not be undone (a human agent will follow up)", not_undone)):
        if items:
            parts.append(f"{label}: {'; '.join(items)}")
    for label, items in (("Did not go through", details(StepStatus.FAILED)),  # quoted: what was asked
                         ("Not known whether it went through (a human agent is checking)",
                          details(StepStatus.UNKNOWN)),
                         ("Not done", details(StepStatus.CANCELLED))):
        if items:
            parts.append(f"{label}: {replies.requests(items)}")
    if len(parts) == 1:
        parts.append("Nothing had been changed.")
    return " ".join(parts)
