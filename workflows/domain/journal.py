"""What a conversation records in its journal (the decision log and the transcript), as
pure data: the verdict vocabulary and the records one ``record_turn`` activity call carries.

The journal is our own SQL store (``activities.journal``), not the system of record, and
nothing here grows the workflow state: a turn collects its records in workflow memory
(``workflows.conversation.journal``) and sends them once when the turn is answered. Every record is
keyed by business identity (conversation, turn, sequence number within the turn), so a
retried activity, a replay or a reset re-running a turn overwrites rows instead of adding
them. Strings carry no length limits here on purpose: the workflow must never fail to build
a record (a validation error in workflow code would stall the conversation); the journal's
database judges the data, and the activity reports a refusal as non-retryable. Pure:
imported inside the workflow sandbox.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Optional

from pydantic import BaseModel, Field


class Verdict(str, Enum):
    """What the workflow made of one model call's proposal (its latest stage wins: a write
    is ``shown``, then ``confirmed`` or ``declined``, then ``executed`` with an outcome)."""

    READ_RAN = "read_ran"
    """Accepted read; ``outcome`` says whether it applied, was refused or is unknown."""
    REPLIED = "replied"
    """Accepted reply, sent to the user."""
    SHOWN = "shown"
    """Accepted write, shown to the user for confirmation."""
    CONFIRMED = "confirmed"
    """The user confirmed the shown write; it waits for a supervisor's approval."""
    EXECUTED = "executed"
    """The confirmed write ran; ``outcome`` is applied, refused or unknown."""
    DECLINED = "declined"
    """The shown write did not run: the user said no or moved on, its confirmation failed
    the policy, or a supervisor rejected it / the approval expired (``rule`` says which)."""
    TRANSFERRED = "transferred"
    """Accepted transfer to a human agent."""
    ENDED = "ended"
    """Accepted end of the conversation."""
    REJECTED = "rejected"
    """The policy refused the proposal (``rule``, ``reason``)."""
    MALFORMED = "malformed"
    """No usable proposal: malformed or cut-off output, or the call failed."""
    SUPERSEDED = "superseded"
    """Discarded because a newer user message arrived while it was being proposed."""
    CANCELLED = "cancelled"
    """The conversation was cancelled before the proposal's write ran."""

    @property
    def accepted(self) -> bool:
        """True when the policy accepted the proposal (whatever happened after)."""
        return self in ACCEPTED_VERDICTS


ACCEPTED_VERDICTS = frozenset({
    Verdict.READ_RAN, Verdict.REPLIED, Verdict.SHOWN, Verdict.CONFIRMED, Verdict.EXECUTED,
    Verdict.DECLINED, Verdict.TRANSFERRED, Verdict.ENDED, Verdict.CANCELLED,
})
"""Verdicts of proposals the policy accepted (``DECLINED`` and ``CANCELLED`` happen after
acceptance, to a shown write); the rest (rejected, malformed, superseded) were not acted on."""


class Role(str, Enum):
    """Who speaks in a transcript entry."""

    USER = "user"
    ASSISTANT = "assistant"


class EntryKind(str, Enum):
    """What a transcript entry is."""

    MESSAGE = "message"
    """A user message (with its client message id)."""
    REPLY = "reply"
    """The assistant's reply to a user message."""
    NOTICE = "notice"
    """What the user is told outside a turn (a supervisor's decision, an expired approval)."""
    CANCELLATION = "cancellation"
    """The summary of a cancelled conversation."""


class VerdictRecord(BaseModel):
    """The verdict on the proposal of model call ``call_seq`` of user turn ``turn``.

    ``call_seq`` None names the last model call of ``turn``: the one whose write was shown
    (a turn shows at most one write, and showing it ends the turn), so a later turn, an
    approval or a cancel can settle it without remembering its sequence number."""

    turn: int = Field(ge=0)
    call_seq: Optional[int] = Field(default=None, ge=1)
    verdict: Verdict
    rule: Optional[str] = None
    reason: Optional[str] = None
    outcome: Optional[str] = None
    """``workflows.domain.contracts.Outcome`` value of a read or an executed write."""
    at: datetime


class TranscriptRecord(BaseModel):
    """One transcript entry: entry ``seq`` (from 0, in order) of user turn ``turn``.
    Entries told outside a turn continue the numbering of the turn before them."""

    turn: int = Field(ge=0)
    seq: int = Field(ge=0)
    role: Role
    kind: EntryKind
    text: str
    message_id: Optional[str] = None
    """The client's message id (the update id) of a user message."""
    at: datetime


class TurnRecord(BaseModel):
    """Input of ``JournalActivities.record_turn``: what one turn (or one batch of notices,
    or a cancellation) adds to the journal. ``customer_id`` is the authenticated customer
    at the time (None before authentication), kept for erasure by customer."""

    conversation_id: str
    customer_id: Optional[str] = None
    turn: Optional[int] = Field(default=None, ge=0)
    """The user turn this record completes (None: notices or a cancellation outside a turn).
    Its rows beyond ``model_calls`` and its last entry are left over from an earlier run of
    the turn (a reset) and are removed."""
    model_calls: int = Field(default=0, ge=0)
    """How many model calls user turn ``turn`` made."""
    verdicts: list[VerdictRecord] = Field(default_factory=list)
    transcript: list[TranscriptRecord] = Field(default_factory=list)

    def with_reply(self, call_seq: int, text: str, at: datetime) -> "TurnRecord":
        """This record (a turn's so far) completed by an accepted reply: model call ``call_seq``
        replied ``text`` (verdict ``replied``, the next transcript entry). What the model activity
        writes when its proposal is a reply (``workflows.domain.contracts.ModelRequest.journal``)."""
        seq = max((e.seq for e in self.transcript if e.turn == self.turn), default=-1) + 1
        return self.model_copy(update={
            "model_calls": call_seq,
            "verdicts": [*self.verdicts, VerdictRecord(turn=self.turn or 0, call_seq=call_seq,
                                                       verdict=Verdict.REPLIED, at=at)],
            "transcript": [*self.transcript, TranscriptRecord(turn=self.turn or 0, seq=seq, role=Role.ASSISTANT,
                                                              kind=EntryKind.REPLY, text=text, at=at)]})

    def same_rows(self, other: "TurnRecord") -> bool:
        """Whether ``other`` writes the same rows as this record (the times aside)."""
        def rows(r: TurnRecord) -> tuple:
            return (r.conversation_id, r.customer_id, r.turn, r.model_calls,
                    [v.model_dump(exclude={"at"}) for v in r.verdicts],
                    [e.model_dump(exclude={"at"}) for e in r.transcript])
        return rows(self) == rows(other)
