"""The conversation's typed, versioned state: the system of record of the process.

The transcript is not the state. What the process depends on lives here as typed
fields: the authenticated customer, facts read from the system of record, steps
with explicit statuses, user facts pinned verbatim with their turn, the proposal
awaiting confirmation, completed operations with their idempotency keys, and
rejected proposals with their reasons. Only a bounded window of recent turns is
kept; nothing is ever summarised away. The records it is made of live in
``workflows.domain.records`` and are re-exported here.

Pure and deterministic: imported inside the Temporal workflow sandbox.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from pydantic import Field, PrivateAttr

from workflows.domain.actions import ToolCall
from workflows.domain.policy.approvals import Approval, ApprovalStatus
from workflows.domain.records import (  # noqa: F401  (re-exported: the state's vocabulary)
    OBSERVATIONS_KEPT,
    RECENT_TURNS_KEPT,
    REJECTIONS_KEPT,
    STEPS_KEPT,
    CompletedOperation,
    Confirmation,
    ConversationStatus,
    Customer,
    Observation,
    OutcomeResolution,
    OrderFact,
    OrderItem,
    PaymentEntry,
    PaymentMethod,
    Phase,
    PinnedFact,
    ProductFact,
    Record,
    Rejection,
    Role,
    Step,
    StepStatus,
    Turn,
    TurnNumber,
    Usage,
    Variant,
)

SCHEMA_VERSION = 3
"""The state's schema version, written into every state. Bump it with every change of the
state's shape or meaning, and add the step from the previous version to
``workflows.domain.migrations.MIGRATIONS`` (2: money became cent ``Decimal``, was float; 3: the
conversation's ``phase``). A field
added with a default that an older state reads as "none yet" needs no bump (``Usage``'s
cache and budget fields, ``resolutions``)."""


class PendingConfirmation(Record):
    """A validated consequential write, shown to the user, awaiting their yes.

    ``digest`` binds the confirmation to this exact call (``actions.call_digest``).
    ``operation_id`` is minted by the workflow when the proposal is accepted and
    becomes part of the idempotency key.
    """

    operation_id: str
    call: ToolCall
    detail: str
    digest: str
    proposed_turn: TurnNumber


class ConversationState(Record):
    """Everything the support process knows; returned by the ``state`` query. A state
    saved by another version (a workflow input, a stored dump) is read through
    ``workflows.domain.migrations.load_state``, never validated directly: an unknown field is
    refused (``extra="forbid"``), not dropped."""

    schema_version: int = SCHEMA_VERSION
    conversation_id: str
    store: str = "main"
    system_of_record: Optional[str] = None
    """Fingerprint of the database that answered this conversation's first tool call; every
    later call carries it, so a worker on another database refuses instead of acting there."""
    status: ConversationStatus = ConversationStatus.ACTIVE
    phase: Phase = Phase.OPEN
    """Where the conversation stands (``Phase``); set by ``workflows.domain.transitions``."""
    turn: TurnNumber = 0
    customer: Optional[Customer] = None
    orders: dict[str, OrderFact] = Field(default_factory=dict)
    products: dict[str, ProductFact] = Field(default_factory=dict)
    steps: list[Step] = Field(default_factory=list)
    pinned_facts: list[PinnedFact] = Field(default_factory=list)
    recent_turns: list[Turn] = Field(default_factory=list)
    observations: list[Observation] = Field(default_factory=list)
    pending_confirmation: Optional[PendingConfirmation] = None
    awaiting_approval: list[PendingConfirmation] = Field(default_factory=list)
    """Confirmed writes waiting for a supervisor's decision (their approvals are in ``approvals``)."""
    approvals: list[Approval] = Field(default_factory=list)
    """Every approval this conversation asked for, pending or decided (approver and time)."""
    completed_operations: list[CompletedOperation] = Field(default_factory=list)
    rejections: list[Rejection] = Field(default_factory=list)
    resolutions: list[OutcomeResolution] = Field(default_factory=list)
    """Operators' resolutions of steps whose outcome was unknown (``workflows.conversation.resolution``)."""
    usage: Usage = Field(default_factory=Usage)
    model_trouble_turns: int = Field(default=0, ge=0)
    """User turns in a row that ended without a usable proposal from the model (malformed or
    truncated output, a failed call, no answer within the turn's steps); a usable turn resets it
    (``workflows.conversation.model_trouble``)."""
    ended_reason: Optional[str] = None
    reset_epoch: Optional[str] = Field(default=None, max_length=16)
    """The epoch of the last reset this conversation went through (``journal.reset_epoch``: 8 hex
    digits of the seed a reset gave the run), None before any (and in states saved without it):
    the public events noted after it carry it in their keys, so they get new ids
    (``workflows.domain.journal``). Carried through continue-as-new, whose new seed is no reset."""
    _listeners: list[Callable[[Any], None]] = PrivateAttr(default_factory=list)
    """Who hears the events the transitions record on this object (memory: never saved)."""

    # --- the events of the transitions (``workflows.domain.transitions.Event``) ---
    def subscribe(self, listener: Callable[[Any], None]) -> None:
        """Call ``listener`` with every event a transition records on this state object, when
        it is recorded. Events live in memory only: they are not part of the saved state."""
        self._listeners.append(listener)

    def emit(self, event: Any) -> None:
        """Record ``event`` (``workflows.domain.transitions`` calls this): every listener hears it."""
        for listener in self._listeners:
            listener(event)

    # --- small pure helpers; mutation stays in workflows.domain.transitions ---
    def last_rejection(self) -> Optional[Rejection]:
        """The most recent rejected proposal, if any."""
        return self.rejections[-1] if self.rejections else None

    def pending_approvals(self) -> list[Approval]:
        """Approvals still waiting for a supervisor, oldest first."""
        return [a for a in self.approvals if a.status is ApprovalStatus.PENDING]

    def is_open(self) -> bool:
        """True while the conversation is not finished (status ``active``: its phase is open,
        awaiting the user or a supervisor, or closing)."""
        return self.phase.active

    def user_message(self, turn: int) -> Optional[str]:
        """The text of the user's message of ``turn``, while it is among the recent turns, or None."""
        return next((t.text for t in reversed(self.recent_turns) if t.turn == turn and t.role is Role.USER), None)

    def operations_on(self, order_id: str) -> list[CompletedOperation]:
        """Completed writes on ``order_id``, oldest first."""
        return [op for op in self.completed_operations if op.arguments.get("order_id") == order_id]
