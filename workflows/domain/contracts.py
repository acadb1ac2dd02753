"""Input and output models of every activity and child workflow (one input model each).

Pure pydantic, imported by workflows (inside the sandbox) and by activities.
"""

from __future__ import annotations

import hashlib

from enum import Enum
from typing import Any, Optional

from pydantic import BaseModel, Field, field_validator, model_validator

from workflows.domain.actions import ModelProposal, ToolCall
from workflows.domain.policy.approvals import Approval, ApprovalPolicy
from workflows.domain.journal import TurnRecord
from workflows.domain.prompt import ModelSnapshot
from workflows.domain.user_text import visible_text


DEFAULT_WRITE_TIMEOUT_SECONDS = 30.0
"""Start-to-close timeout of a write activity, in seconds, unless the settings say otherwise."""



# The side-channel activities: the customer-email outbox and human hand-off tickets, each
# written at most once per caller-chosen key, and the ticket look-up.

class EmailRequest(BaseModel):
    """Input of ``send_customer_email``: one outbox message, exactly once per ``message_key``."""

    store: str
    message_key: str
    to_email: str
    subject: str
    body: str


class TicketLookup(BaseModel):
    """Input of ``find_ticket``: is a hand-off ticket open under ``ticket_key`` in ``store``?"""

    store: str
    ticket_key: str


class TicketRequest(TicketLookup):
    """Input of ``open_ticket``: a hand-off to a human agent, exactly once per ``ticket_key``."""

    user_id: Optional[str] = None
    summary: str


class ModelRequest(BaseModel):
    """Input of the ``propose_action`` LLM activity: one stateless model call, model call
    ``call_seq`` (from 1) of user turn ``turn``. The activity renders ``view`` (the state
    view, ``workflows.domain.prompt.state_view``) with prompt ``prompt_version`` and records the
    call in the decision log under (conversation, turn, call_seq).

    ``snapshot`` is the rendered input that v0.1.0 sent instead of the view: kept so that
    its recorded calls still decode and run (they are not recorded in the decision log)."""

    conversation_id: str
    turn: int = Field(default=0, ge=0)
    call_seq: int = Field(default=0, ge=0)
    prompt_version: Optional[str] = None
    view: Optional[dict[str, Any]] = None
    snapshot: Optional[ModelSnapshot] = None
    budget_remaining_tokens: Optional[int] = None
    """Tokens left of the conversation's budget (None: no budget): the activity counts the
    request first (the provider's token counting) and refuses it with ``TokenBudgetExceeded``
    when it would not fit."""
    journal: Optional[TurnRecord] = None
    """The turn's journal record so far: when the proposal is a reply, the activity writes it
    completed by that reply (``TurnRecord.with_reply``) and says so in ``ModelResult.journaled``,
    so the turn's own journal write (one history event) is skipped when the workflow accepted
    the reply as is (``workflows.conversation.journal``)."""

    @model_validator(mode="after")
    def _has_input(self) -> "ModelRequest":
        if self.view is None and self.snapshot is None:
            raise ValueError("a model request needs a view or a snapshot")
        return self


class ModelResult(BaseModel):
    """Output of the LLM activity: the typed proposal plus token usage and model id
    (``input_tokens`` uncached, plus the cache read and cache write input tokens)."""

    action: ModelProposal
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    journaled: bool = False
    """The activity wrote ``ModelRequest.journal`` completed by this reply (see there)."""


class ReadToolRequest(BaseModel):
    """Input of ``run_read_tool``: a read against the system of record of ``store``.
    ``scope_user_id`` is the authenticated customer: the system answers as if other
    customers' orders did not exist (policy one-customer)."""

    store: str
    call: ToolCall
    scope_user_id: Optional[str] = None
    system_of_record: Optional[str] = None
    """The fingerprint of the database the process is bound to (None: not bound yet)."""


class StoreCheckRequest(BaseModel):
    """Input of ``check_store``: does the system of record hold this store (tenant)?"""

    store: str


class Outcome(str, Enum):
    """What a tool call did. ``applied``: it ran (a read answered, a write took effect);
    ``refused``: the system answered with a business error and changed nothing;
    ``unknown``: an infrastructure failure after which the effect may or may not have
    happened (the workflow sets it when an activity's retries run out)."""

    APPLIED = "applied"
    REFUSED = "refused"
    UNKNOWN = "unknown"


class ToolResult(BaseModel):
    """A tool's typed outcome and its result string (the retail format: JSON text, a
    plain value, or ``"Error: ..."`` for a refusal)."""

    result: str
    outcome: Outcome
    replayed: bool = False
    """True when a write's idempotency key was already in the ledger: the recorded
    result is returned and nothing is applied again."""
    system_of_record: Optional[str] = None
    """The fingerprint of the database that answered: the process binds to the first one
    and every later call carries it, so a worker on another database refuses it."""

    @property
    def ok(self) -> bool:
        """True when the tool applied."""
        return self.outcome is Outcome.APPLIED


class WriteToolRequest(BaseModel):
    """Input of ``run_write_tool``. ``idempotency_key`` comes from business identity
    (``workflows.domain.keys``: tool, order/user id, conversation and turn), never from model text."""

    store: str
    call: ToolCall
    idempotency_key: str
    system_of_record: Optional[str] = None
    """The fingerprint of the database the process is bound to (None: not bound yet)."""


class PseudonymRequest(BaseModel):
    """Input of ``customer_pseudonym``: the real customer id to map to its keyed pseudonym
    (``workflows.domain.pseudonym``; the key stays in the worker)."""

    customer_id: str


class RefundInput(BaseModel):
    """Input of ``RefundWorkflow``: one refund-type write, confirmed by the user, or a
    backend's standalone request (``conversation_id`` None, ``workflows.refund.standalone``).

    ``expected_user_id`` is the authenticated customer; the fresh read must show the
    order still belongs to them. None (standalone requests only): the order's owner, from
    the fresh read, is the customer. ``notify_email`` receives the return/exchange email.
    ``approvals`` says when the write waits for a supervisor (``workflows.domain.policy.approvals``);
    ``approved_by`` is the supervisor who already approved this exact operation (the
    conversation obtained it), so the refund does not ask again.
    """

    store: str
    operation_id: str
    call: ToolCall
    expected_user_id: Optional[str] = None
    notify_email: Optional[str] = None
    conversation_id: Optional[str] = None
    write_timeout_seconds: float = DEFAULT_WRITE_TIMEOUT_SECONDS
    """Start-to-close timeout of the write activity; after it the write is retried
    with the same idempotency key."""
    approvals: ApprovalPolicy = Field(default_factory=ApprovalPolicy)
    approved_by: Optional[str] = None
    system_of_record: Optional[str] = None
    """The database fingerprint the parent conversation is bound to (its tool calls carry it)."""
    confirmed_fingerprint: Optional[str] = None
    """What the user confirmed (``workflows.domain.policy.read_before_write``): when set, the write runs only
    if the order (and ``confirmed_method_id``'s payment method) read right before it match."""
    confirmed_method_id: Optional[str] = None


class RefundOutcome(BaseModel):
    """Result of ``RefundWorkflow``: the tool result, its idempotency key, why it was
    refused (a failed precondition, or a supervisor's rejection / an expired approval), whether
    the customer was notified, and the approval the write waited for, if any."""

    idempotency_key: str
    result: str
    ok: bool
    replayed: bool = False
    refused_reason: Optional[str] = None
    notified: bool = False
    approval: Optional[Approval] = None
    escalated: bool = False
    """A standalone request whose write's outcome could not be shown: a ticket was opened
    (``workflows.refund.standalone.escalate_unknown``); nothing is replayed automatically."""
    escalation_reason: Optional[str] = None
    """Why it escalated, and whether the ticket opened, worded for the caller (no internals)."""


class SupportInput(BaseModel):
    """Input of ``SupportWorkflow``. ``state`` is set when continuing as new, or by a caller
    resuming a saved conversation."""

    conversation_id: str
    store: str = "main"
    write_timeout_seconds: float = DEFAULT_WRITE_TIMEOUT_SECONDS
    max_turns_per_run: int = 500
    """Continue-as-new after this many user turns in one run (or earlier, when Temporal
    suggests it because the history is large); the state carries over whole."""
    approvals: ApprovalPolicy = Field(default_factory=ApprovalPolicy)
    """When the conversation's refund-type writes wait for a supervisor (``workflows.domain.policy.approvals``)."""
    state: Optional[dict[str, Any]] = None
    """The state to resume, as JSON (``ConversationState.model_dump(mode="json")``) of any
    schema version: the run loads it with ``workflows.domain.migrations.load_state`` (migrated to
    the current version), so an old or broken state fails the run with a typed
    ``StateIncompatible`` error instead of failing to decode. A ``ConversationState`` given
    here is dumped to JSON."""
    cancel: Optional["CancelRequest"] = None
    """A cancel that arrived during the run that continued as new: the next run honours it
    before anything else (it never answers another message)."""
    answered: dict[str, "AssistantReply"] = Field(default_factory=dict)
    """The last replies by message id, from the runs before: a message retried after the
    run continued as new gets its first reply, not a second turn."""
    journal: Optional[TurnRecord] = None
    """The journal record of the turn the run before answered last, not yet written: the
    next run writes it first (``workflows.conversation.journal``)."""
    resolution_wait_seconds: float = Field(default=7 * 86400.0, ge=0)
    """How long an escalated unknown outcome waits for an operator's resolution before the run
    completes as escalated (``workflows.conversation.resolution``; 0: it does not wait)."""
    token_budget: Optional[int] = Field(default=None, ge=1)
    """The conversation's token budget (``Settings.token_budget``; None: none): past it the
    conversation is handed to a human agent (``workflows.conversation.budget``)."""
    local_model_calls: bool = False
    """Model calls as local activities (``Settings.model_calls``; off by default): one workflow
    task per turn with one read instead of three, but a newer message or a cancel reaches a
    running call only at its workflow task's heartbeat (3.2 s) or its end (README, "Recovery").
    In the input, so replay decides the same way on every worker; continue-as-new keeps it."""
    memory: bool = True
    """What is remembered about the customer is read after authentication and the model is
    offered the memory tools (``Settings.memory_enabled``; ``docs/memory.md``). Off: no read, and
    the model calls use the current prompt without the memory tools (``PROMPT_VERSION_WITHOUT_MEMORY``).
    In the input, like ``local_model_calls``; continue-as-new keeps it."""

    @field_validator("state", mode="before")
    @classmethod
    def _state_as_json(cls, value: Any) -> Any:
        return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


class UserMessage(BaseModel):
    """Input of the ``send_message`` update: one user message (non-empty, at most 8 KB UTF-8)."""

    text: str


class AssistantReply(BaseModel):
    """What ``send_message`` returns: the assistant's reply to that message, the
    conversation's status after it, the detail awaiting confirmation, if any, and the
    approval id when a confirmed write waits for a supervisor's decision."""

    text: str
    turn: int
    status: str
    awaiting_confirmation: Optional[str] = None
    awaiting_approval: Optional[str] = None
    message_digest: Optional[str] = None
    """``message_digest`` of the message this replies to: a client that sent another text
    under the same message id learns its message was not the one handled (409)."""


def message_digest(text: str) -> str:
    """16 hex characters of the SHA-256 of the visible text of ``text`` (UTF-8; ``visible_text``):
    which message a reply answers. A retry that drops or adds invisible characters is the same
    message, as the workflow reads it."""
    return hashlib.sha256(visible_text(text).encode("utf-8", "surrogatepass")).hexdigest()[:16]


class CancelRequest(BaseModel):
    """Input of the ``cancel`` signal (and what a Temporal cancellation becomes).

    What happens, by tool class (README, "Cancellation"): an in-flight model call or read
    is cancelled; an irreversible write in flight is awaited, never abandoned, and
    reported; reversible writes already done are kept and reported, or, with
    ``rollback``, undone by their compensation (newest first); every other step becomes
    cancelled and nothing new starts."""

    reason: str = Field(default="cancelled by the backend", min_length=1, max_length=1000)
    rollback: bool = False
    """True: the user asked to undo everything reversible this conversation did."""


class SupportOutcome(BaseModel):
    """Result of ``SupportWorkflow``: final status and the final state."""

    status: str
    state: "ConversationState"


from workflows.domain.state import ConversationState  # noqa: E402  (after the models that reference it)

SupportInput.model_rebuild()
SupportOutcome.model_rebuild()


# --- the tenant's daily token budget (``TenantActivitiesApi.tenant_allowance``, workflows.conversation.budget) ---

class AllowanceRequest(BaseModel):
    """Input of ``tenant_allowance``: the conversation and its ``Tenant`` search attribute
    (None: the default tenant, which the worker's settings name)."""

    conversation_id: str = Field(max_length=1000)
    tenant: Optional[str] = Field(default=None, max_length=64)


class TenantAllowance(BaseModel):
    """The tenant's daily token budget and what its conversations used of it today (UTC):
    ``daily_tokens`` None is no cap (``used_today`` is then not counted: 0)."""

    tenant: str = Field(max_length=64)
    daily_tokens: Optional[int] = Field(default=None, ge=1)
    used_today: int = Field(default=0, ge=0)

    def spent(self, more: int = 0) -> bool:
        """True when the cap is reached, counting ``more`` tokens used since it was asked."""
        return self.daily_tokens is not None and self.used_today + more >= self.daily_tokens
