"""What the supervisors' inbox says to a person: how long an approval has left, how an approval
ended, and what became of a decision they sent. Plain sentences: no approval ids, error kinds or
exception names (the ids stay in the page's markup, where the script needs them).

Times are shown in UTC, as the API reports them.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Optional

from starter.client.approvals import ApprovalItem
from workflows.domain.policy.approvals import ApprovalStatus

NOTE_RULE = "at most 1000 characters, without control characters"


def when(at: Optional[datetime]) -> str:
    """``at`` for a person: ``2026-12-06 14:05 UTC`` (``an unknown time`` for None)."""
    if at is None:
        return "an unknown time"
    return f"{at.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC"


def time_left(expires_at: Optional[datetime], now: datetime) -> str:
    """How long before ``expires_at`` (from ``now``): ``23 h 59 min left``, ``4 min 10 s left``,
    ``9 s left``, ``expiring now``; ``unknown`` for None. ``inbox.js`` counts down the same way."""
    if expires_at is None:
        return "unknown"
    seconds = int((expires_at - now).total_seconds())
    if seconds <= 0:
        return "expiring now"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours >= 24:
        return f"{hours // 24} d {hours % 24} h left"
    if hours:
        return f"{hours} h {minutes} min left"
    if minutes:
        return f"{minutes} min {secs} s left"
    return f"{secs} s left"


def what(item: ApprovalItem) -> str:
    """The process an approval belongs to, for a sentence: ``the conversation`` or ``the refund``."""
    return "the conversation" if item.process == "conversation" else "the refund"


def outcome(item: ApprovalItem) -> str:
    """How ``item`` stands, as a second supervisor (or anyone) reads it."""
    status, by, at = item.status, item.decided_by, when(item.decided_at)
    if status is ApprovalStatus.APPROVED:
        return f"Approved by {by} at {at}: the change is being made, and the customer is told."
    if status is ApprovalStatus.REJECTED:
        return f"Rejected by {by} at {at}: nothing is changed, and the customer is told the request was declined."
    if status is ApprovalStatus.EXPIRED:
        return (f"This approval expired at {when(item.expires_at)} before anyone decided: nothing was changed, "
                "and the request was handed to a human agent as a ticket.")
    if status is ApprovalStatus.WITHDRAWN:
        if by:
            return (f"Approved by {by}, but {what(item)} closed before the change could be made: "
                    "nothing was changed.")
        return f"Withdrawn: {what(item)} closed before anyone decided, so there is nothing left to decide."
    return "Still waiting for a decision."


def own(item: ApprovalItem, decision: str) -> str:
    """What a supervisor reads after their own ``decision`` (approve or reject) was taken."""
    # pending: the decision was taken, and its process has not shown it yet
    if item.status in (ApprovalStatus.APPROVED, ApprovalStatus.PENDING) and decision == "approve":
        return "You approved this: the change is being made, and the customer is told."
    if item.status in (ApprovalStatus.REJECTED, ApprovalStatus.PENDING) and decision == "reject":
        return "You rejected this: nothing is changed, and the customer is told the request was declined."
    return outcome(item)


def late(item: Optional[ApprovalItem], decision: str) -> str:
    """What a supervisor reads when their ``decision`` was refused because the approval is no
    longer pending (``item``: how it stands now; None: it could not be read)."""
    verb = "approval" if decision == "approve" else "rejection"
    if item is None:
        return f"Your {verb} was not applied: this approval can no longer be decided."
    if item.status is ApprovalStatus.PENDING:  # refused while pending: its process is stuck
        return (f"Your {verb} was not applied: {what(item)} is not taking decisions just now, and an operator "
                "must look at it.")
    if item.status is ApprovalStatus.EXPIRED:
        return f"Your {verb} was not applied. " + outcome(item)
    if item.status in (ApprovalStatus.APPROVED, ApprovalStatus.REJECTED):
        return f"Your {verb} was not applied: someone decided first. " + outcome(item)
    return f"Your {verb} was not applied. " + outcome(item)


def refused(answer: int, decision: str) -> str:
    """What a supervisor reads when the decision route answered ``answer`` (an HTTP status, 0:
    no answer at all) for a reason other than the approval's own state."""
    verb = "approval" if decision == "approve" else "rejection"
    if answer == 404:
        return f"Your {verb} was not applied: this approval no longer exists."
    if answer == 403:
        return f"Your {verb} was not applied: your key may not decide approvals (that needs an operator key)."
    if answer == 422:
        return f"Your {verb} was not sent: the note must be {NOTE_RULE}."
    if answer == 429:
        return f"Your {verb} was not sent: too many requests from your key just now. Wait a moment and try again."
    if answer in (503, 504, 0):
        return (f"Your {verb} could not be confirmed: the service did not answer in time. It may still be "
                "applied; this page shows it when it is. If it stays pending, try again.")
    return f"Your {verb} was not applied. Reload the page and try again."
