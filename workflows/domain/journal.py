"""What a conversation records in its journal (the decision log and the transcript), as
pure data: the verdict vocabulary and the records one ``record_turn`` activity call carries.

The journal is our own SQL store (``activities.journal``), not the system of record, and
nothing here grows the workflow state: a turn collects its records in workflow memory
(``workflows.conversation.journal``) and sends them once when the turn is answered. Every record is
keyed by business identity (conversation, turn, sequence number within the turn), so a
retried activity, a replay or a reset re-running a turn overwrites rows instead of adding
them. The public events (``EventRecord``, below) ride in the same records. Strings carry
no length limits here on purpose: the workflow must never fail to build a record (a
validation error in workflow code would stall the conversation); the journal's database
judges the data, and the activity reports a refusal as non-retryable. Pure: imported inside
the workflow sandbox.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from enum import Enum
from typing import Any, Iterable, Optional

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


# --- public events ----------------------------------------------------------------------

# The event model: what a conversation or a refund tells the outside world happened, as typed events.
#
# An event's body is ``{id, type, timestamp, sequence, data}`` (``PublicEvent``). The workflow
# builds each one as an ``EventRecord`` (its ``key``, type, data and time): a conversation beside
# the journal's rows of the same turn (``workflows.conversation.journal``), a refund in its own
# record (``RefundEventsRecord``, ``workflows.refund.events``); the journal's activity writes
# it to the journal's database (``activities.store.journal``), which gives it its ``sequence``.
#
# Identity: an event's ``key`` names the business fact (``started``, ``reply:<turn>:<entry>``,
# ``op:<operation id>:<type>``, ``approval:<approval id>:<type>``, ``ticket:<ticket id>``,
# ``ended:<turn>:<resolutions>``, a refund's ``completed``), and its ``id`` is a digest of the
# process id and the key (``event_id``). A retried activity, a replayed workflow task, a worker
# restart or a continue-as-new that re-sends the same fact sends the same key: the store keeps the
# first and ignores the rest, so the fact keeps its id, its sequence and its time. Sequence numbers
# are per process, from 1, without gaps, in the order the store first hears of each key
# (``assign_sequences``).
#
# Resets: a reset gives the run a new random seed at the reset point, and only there (a run
# continued as new gets a new one at its start, which is not a reset). The workflow turns the new
# seed into a reset epoch (``reset_epoch``) and every key noted after it ends with ``@<epoch>``
# (``with_epoch``): facts re-done past a reset point are new events with new ids, continuing the
# sequence, while those before it keep theirs. ``started`` never takes an epoch (once per process).
#
# Payloads (``data``) carry ids, statuses, amounts and the rule (clause) of a refusal, never
# an email, a name, an address, a payment method id or the words of the conversation. Pure:
# imported inside the workflow sandbox.

class EventType(str, Enum):
    """The types of a conversation's and a refund's events (``docs/events.md`` shows each
    with an example)."""

    CONVERSATION_STARTED = "conversation.started"
    CONVERSATION_REPLIED = "conversation.replied"
    CONFIRMATION_REQUESTED = "confirmation.requested"
    APPROVAL_REQUESTED = "approval.requested"
    APPROVAL_DECIDED = "approval.decided"
    APPROVAL_EXPIRED = "approval.expired"
    APPROVAL_WITHDRAWN = "approval.withdrawn"
    OPERATION_APPLIED = "operation.applied"
    OPERATION_REFUSED = "operation.refused"
    OPERATION_UNKNOWN = "operation.unknown"
    OPERATION_COMPENSATED = "operation.compensated"
    TICKET_OPENED = "ticket.opened"
    MEMORY_REMEMBERED = "memory.remembered"
    MEMORY_FORGOTTEN = "memory.forgotten"
    REFUND_COMPLETED = "refund.completed"
    CONVERSATION_ENDED = "conversation.ended"


TERMINAL_TYPES = frozenset({EventType.CONVERSATION_ENDED, EventType.REFUND_COMPLETED})
"""Types after which a process records nothing more: a refund never, a conversation unless an
operator reopens it (an escalated conversation whose unknown outcome is resolved)."""


class EventRecord(BaseModel):
    """One event as the workflow sends it: ``key`` its business identity within the
    conversation (see the module), ``at`` the workflow's clock (UTC)."""

    key: str = Field(min_length=1)
    type: EventType
    data: dict[str, Any] = Field(default_factory=dict)
    at: datetime


class PublicEvent(BaseModel):
    """An event as callers read it. ``id``: stable across retries and restarts (``evt_`` and
    24 hex digits); ``sequence``: from 1 per conversation, without gaps; ``timestamp``: when
    it happened (UTC); ``data.conversation_id``: the caller's conversation id."""

    id: str
    type: str
    timestamp: datetime
    sequence: int = Field(ge=1)
    data: dict[str, Any]


def event_id(conversation_id: str, key: str) -> str:
    """``evt_`` + 24 hex digits of sha256(process id, key): the same fact of the same
    conversation (or refund) always has the same id, and different keys differ."""
    digest = hashlib.sha256(f"{len(conversation_id)}:{conversation_id}|{key}".encode()).hexdigest()
    return f"evt_{digest[:24]}"


def assign_sequences(known: dict[str, int], keys: Iterable[str]) -> list[tuple[str, int]]:
    """The (key, sequence) of each key not in ``known`` (key → its sequence), in order, each
    once: numbering continues after the highest known sequence (from 1). Keys already known
    keep their sequence and are left out."""
    last = max(known.values(), default=0)
    new: list[tuple[str, int]] = []
    seen = set(known)
    for key in keys:
        if key in seen:
            continue
        seen.add(key)
        last += 1
        new.append((key, last))
    return new


# --- event keys ---------------------------------------------------------------------------------

def started_key() -> str:
    """The key of ``conversation.started`` (once per conversation)."""
    return "started"


def reply_key(turn: int, seq: int) -> str:
    """The key of ``conversation.replied`` for transcript entry ``seq`` of user turn ``turn``."""
    return f"reply:{turn}:{seq}"


def operation_key(operation_id: str, type_: EventType) -> str:
    """The key of an event of type ``type_`` about the write ``operation_id``."""
    return f"op:{operation_id}:{type_.value}"


def approval_key(approval_id: str, type_: EventType) -> str:
    """The key of an event of type ``type_`` about the approval ``approval_id``."""
    return f"approval:{approval_id}:{type_.value}"


def ended_key(turn: int, resolutions: int) -> str:
    """The key of ``conversation.ended`` when it closed in (or after) user turn ``turn`` with
    ``resolutions`` operators' resolutions so far: a conversation an operator's resolution
    reopened can end again, even within the same turn."""
    return f"ended:{turn}:{resolutions}"


def failed_key(run_id: str) -> str:
    """The key of ``conversation.ended`` (status ``failed``) of the run ``run_id`` that failed
    itself (its input state could not be loaded): each run that fails is its own fact."""
    return f"failed:{run_id}"


def ticket_id(ticket_key: str) -> str:
    """``tkt_`` + 16 hex digits of sha256(ticket key): how an event names a human-agent ticket
    (the key itself may hold a customer id); the same ticket always has the same id."""
    return "tkt_" + hashlib.sha256(ticket_key.encode()).hexdigest()[:16]


def ticket_key(ticket: str) -> str:
    """The key of ``ticket.opened`` for the ticket ``ticket`` (its ``ticket_id``)."""
    return f"ticket:{ticket}"


TICKET_REASONS = (("transfer:", "transfer"), ("escalate:", "escalation"),
                  ("approval-expired:", "approval_expired"), ("rollback:", "rollback"))
"""Ticket key prefix (``workflows.domain.keys``) -> the ``reason`` a ``ticket.opened`` states."""


def ticket_reason(ticket_key_: str) -> str:
    """Why the ticket under ``ticket_key_`` was opened: ``transfer`` (a hand-over to a human
    agent), ``escalation`` (a write's outcome could not be shown), ``approval_expired``,
    ``rollback`` (a cancel's rollback could not undo a write), else ``other``."""
    return next((reason for prefix, reason in TICKET_REASONS if ticket_key_.startswith(prefix)), "other")


COMPLETED_KEY = "completed"
"""The key of a refund's ``refund.completed`` (once per refund)."""

EPOCH_CHARS = 8
"""Hex digits of a reset epoch (``reset_epoch``)."""


def reset_epoch(seed: int) -> str:
    """The reset epoch of a run whose random seed became ``seed`` at a reset point: the low
    ``EPOCH_CHARS`` hex digits of the seed (a new seed is random, so two resets of one
    conversation share an epoch with odds of one in four billion)."""
    return f"{seed & (16 ** EPOCH_CHARS - 1):0{EPOCH_CHARS}x}"


def with_epoch(key: str, epoch: Optional[str]) -> str:
    """``key`` as noted after the reset epoch ``epoch`` (None: no reset so far): ``key@epoch``.
    ``started`` never takes one: a conversation starts once however often it is reset."""
    return key if epoch is None or key == started_key() else f"{key}@{epoch}"


def replied(conversation_id: str, turn: int, seq: int, kind: str, at: datetime,
            epoch: Optional[str] = None) -> EventRecord:
    """``conversation.replied``: the user was shown transcript entry ``seq`` of turn ``turn``
    (``kind``: reply, notice or cancellation), noted in reset epoch ``epoch``. The text stays in
    the transcript: it may hold the customer's personal data."""
    return EventRecord(key=with_epoch(reply_key(turn, seq), epoch), type=EventType.CONVERSATION_REPLIED, at=at,
                       data={"conversation_id": conversation_id, "turn": turn, "entry": seq, "kind": kind})


class TurnRecord(BaseModel):
    """Input of ``JournalActivities.record_turn``: what one turn (or one batch of notices,
    or a cancellation) adds to the journal. ``customer_id`` is the authenticated customer
    at the time (None before authentication), kept for erasure by customer."""

    conversation_id: str
    customer_id: Optional[str] = None
    tenant: Optional[str] = None
    """The conversation's tenant (its ``Tenant`` search attribute; None: the default tenant):
    whose webhook subscriptions receive the record's events (``activities.store.webhooks``)."""
    turn: Optional[int] = Field(default=None, ge=0)
    """The user turn this record completes (None: notices or a cancellation outside a turn).
    Its rows beyond ``model_calls`` and its last entry are left over from an earlier run of
    the turn (a reset) and are removed."""
    model_calls: int = Field(default=0, ge=0)
    """How many model calls user turn ``turn`` made."""
    verdicts: list[VerdictRecord] = Field(default_factory=list)
    transcript: list[TranscriptRecord] = Field(default_factory=list)
    events: list[EventRecord] = Field(default_factory=list)
    """The events of the same stretch (``workflows.domain.events``), in the order they happened."""
    reset_epoch: Optional[str] = Field(default=None, max_length=16)
    """The conversation's reset epoch when the record was made (``with_epoch``): the model
    activity keys the reply it adds (``with_reply``) as the workflow does."""

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
                                                              kind=EntryKind.REPLY, text=text, at=at)],
            "events": [*self.events, replied(self.conversation_id, self.turn or 0, seq, EntryKind.REPLY.value, at,
                                             self.reset_epoch)]})

    def same_rows(self, other: "TurnRecord") -> bool:
        """Whether ``other`` writes the same rows as this record (the times aside)."""
        def rows(r: TurnRecord) -> tuple:
            return (r.conversation_id, r.customer_id, r.turn, r.model_calls,
                    [v.model_dump(exclude={"at"}) for v in r.verdicts],
                    [e.model_dump(exclude={"at"}) for e in r.transcript],
                    [e.model_dump(exclude={"at"}) for e in r.events])
        return rows(self) == rows(other)


class RefundEventsRecord(BaseModel):
    """Input of ``JournalActivities.record_refund_events``: events of refund ``refund_id`` (its
    workflow id), in the order they happened. ``conversation_id``: the conversation that started
    it (None for a backend's standalone request), so erasing that conversation erases them;
    ``customer_id``: the order's owner (None when the order could not be read), for erasure by
    customer. Stored apart from conversations' events (``refund_events``): a conversation id is
    any text, so it could equal a refund id."""

    refund_id: str
    conversation_id: Optional[str] = None
    customer_id: Optional[str] = None
    tenant: Optional[str] = Field(default=None, max_length=64)
    """The refund's tenant (its ``Tenant`` search attribute; None: the default tenant): whose
    webhooks its events go to (``activities.store.webhooks``)."""
    events: list[EventRecord] = Field(default_factory=list)
