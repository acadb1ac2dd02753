"""Every typed failure that crosses the Temporal boundary, in one enum.

Activities raise ``ApplicationError(type=ErrorType.X.value)``; retry policies list the
non-retryable ones by the same values; the client and the API map them to refusals.
Pure: imported inside the workflow sandbox.
"""

from __future__ import annotations

from enum import Enum


class ErrorType(str, Enum):
    """The ``type`` of an ``ApplicationError`` raised by our activities and handlers."""

    UNKNOWN_TOOL = "UnknownTool"
    """The system has no tool of that name (a catalogue/system mismatch: deterministic)."""
    INVALID_ARGUMENTS = "InvalidArguments"
    """A request the activity can never serve (a write sent as a read, a foreign key)."""
    UNKNOWN_STORE = "UnknownStore"
    """The store (tenant) is not seeded in the system of record."""
    IDEMPOTENCY_KEY_CONFLICT = "IdempotencyKeyConflict"
    """The key was recorded for another tool or other arguments: retrying cannot help."""
    MODEL_REQUEST_REJECTED = "ModelRequestRejected"
    """The model provider refused the request itself (4xx other than 408/409/429)."""
    MODEL_UNAVAILABLE = "ModelUnavailable"
    """The model provider is unreachable or overloaded (retryable)."""
    MALFORMED_MODEL_OUTPUT = "MalformedModelOutput"
    """The model answered, but not with one valid ``ProposedAction`` (retried as a new call)."""
    TOKEN_BUDGET_EXCEEDED = "TokenBudgetExceeded"
    """The next model call would pass the conversation's token budget (non-retryable)."""
    INVALID_MESSAGE = "InvalidMessage"
    """A user message the conversation refuses (empty, too large); never enters history."""
    CONVERSATION_FINISHED = "ConversationFinished"
    """A message for a conversation that has ended or is being cancelled."""
    WRONG_SYSTEM_OF_RECORD = "WrongSystemOfRecord"
    """The worker that took a tool call serves another database than the one the process
    is bound to: nothing was done. Retryable (the right worker may take the next attempt);
    when the attempts run out the call is known not to have applied."""
    INVALID_JOURNAL_RECORD = "InvalidJournalRecord"
    """The journal's database refused a record's data (too long, wrong type): retrying
    cannot help; the record is dropped and the conversation goes on."""
    JOURNAL_UNAVAILABLE = "JournalUnavailable"
    """The journal's database did not answer (retryable, for a bounded time)."""
    APPROVAL_REFUSED = "ApprovalRefused"
    """A supervisor's decision that cannot apply: already decided, withdrawn or expired
    (``workflows.domain.policy.approvals``)."""
    APPROVAL_UNKNOWN = "ApprovalUnknown"
    """A supervisor's decision names an approval id this process never issued (one bound to
    another operation or other arguments included): the API's 404."""
    RESOLUTION_REFUSED = "ResolutionRefused"
    """An operator's resolution of an unknown outcome that cannot apply: no such step, a step
    whose outcome is not unknown, or one already resolved (``workflows.conversation.resolution``)."""
    AWAITING_RESOLUTION = "AwaitingResolution"
    """A message to a conversation that waits for an operator to resolve an unknown outcome
    (``workflows.conversation.resolution``): refused, not finished; the user is told when it goes on."""
    INVALID_DATA = "InvalidData"
    """A system refused the data of a request as invalid (e.g. a NUL character PostgreSQL
    cannot store, a constraint): deterministic, nothing was written; reported as what it is."""
    OUTCOME_UNKNOWN = "OutcomeUnknown"
    """A request to an external system may or may not have taken effect and asking the system
    afterwards could not tell: never replayed automatically; the step is escalated."""
    STATE_INCOMPATIBLE = "StateIncompatible"
    """A conversation's saved state (its run input) cannot be loaded by this code: saved by a
    newer version, without a valid ``schema_version``, or invalid after migration
    (``workflows.domain.migrations``). The run fails, non-retryable; the client's kind is
    ``state_incompatible``."""
    WEBHOOK_NOT_ACCEPTED = "WebhookNotAccepted"
    """A webhook's receiver did not take a delivery (no answer in time, a non-2xx status, a
    redirect, an address the URL may no longer reach): retried with backoff
    (``workflows.webhooks``)."""
    WEBHOOK_GONE = "WebhookGone"
    """A delivery's webhook was deleted, or its event erased: nothing is left to send (non-retryable)."""


TOOL_NON_RETRYABLE = [
    ErrorType.UNKNOWN_TOOL.value,
    ErrorType.INVALID_ARGUMENTS.value,
    ErrorType.UNKNOWN_STORE.value,
    ErrorType.IDEMPOTENCY_KEY_CONFLICT.value,
    ErrorType.INVALID_DATA.value,
    ErrorType.OUTCOME_UNKNOWN.value,
]
"""Deterministic tool-activity failures: a retry would fail the same way."""
