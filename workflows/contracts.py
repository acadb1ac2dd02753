"""Input and output models of every activity and child workflow (one input model each).

Pure pydantic, imported by workflows (inside the sandbox) and by activities.
"""

from __future__ import annotations

from enum import Enum
from typing import Optional

from pydantic import BaseModel

from workflows.actions import ProposedAction, ToolCall
from workflows.options import DEFAULT_WRITE_TIMEOUT_SECONDS
from workflows.prompt import ModelSnapshot


class ModelRequest(BaseModel):
    """Input of the ``propose_action`` LLM activity: one stateless model call."""

    conversation_id: str
    snapshot: ModelSnapshot


class ModelResult(BaseModel):
    """Output of the LLM activity: the typed proposal plus token usage and model id."""

    action: ProposedAction
    model: str
    input_tokens: int = 0
    output_tokens: int = 0


class ReadToolRequest(BaseModel):
    """Input of ``run_read_tool``: a read against the system of record of ``store``.
    ``scope_user_id`` is the authenticated customer: the system answers as if other
    customers' orders did not exist (policy one-customer)."""

    store: str
    call: ToolCall
    scope_user_id: Optional[str] = None


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

    @property
    def ok(self) -> bool:
        """True when the tool applied."""
        return self.outcome is Outcome.APPLIED


class WriteToolRequest(BaseModel):
    """Input of ``run_write_tool``. ``idempotency_key`` comes from business identity
    (``workflows.keys``: tool, order/user id, conversation and turn), never from model text."""

    store: str
    call: ToolCall
    idempotency_key: str


class PseudonymRequest(BaseModel):
    """Input of ``customer_pseudonym``: the real customer id to map to its keyed pseudonym
    (``workflows.pseudonym``; the key stays in the worker)."""

    customer_id: str


class EmailRequest(BaseModel):
    """Input of ``send_customer_email``: one outbox message, exactly once per ``message_key``."""

    store: str
    message_key: str
    to_email: str
    subject: str
    body: str


class TicketRequest(BaseModel):
    """Input of ``open_ticket``: a hand-off to a human agent, exactly once per ``ticket_key``."""

    store: str
    ticket_key: str
    user_id: Optional[str] = None
    summary: str


class RefundInput(BaseModel):
    """Input of ``RefundWorkflow``: one refund-type write, confirmed by the user.

    ``expected_user_id`` is the authenticated customer; the fresh read must show the
    order still belongs to them. ``notify_email`` receives the return/exchange email.
    """

    store: str
    operation_id: str
    call: ToolCall
    expected_user_id: str
    notify_email: Optional[str] = None
    conversation_id: Optional[str] = None
    write_timeout_seconds: float = DEFAULT_WRITE_TIMEOUT_SECONDS
    """Start-to-close timeout of the write activity; after it the write is retried
    with the same idempotency key."""


class RefundOutcome(BaseModel):
    """Result of ``RefundWorkflow``: the tool result, its idempotency key, why it was
    refused (if the fresh read failed a precondition), and whether the customer was notified."""

    idempotency_key: str
    result: str
    ok: bool
    replayed: bool = False
    refused_reason: Optional[str] = None
    notified: bool = False


class SupportInput(BaseModel):
    """Input of ``SupportWorkflow``. ``state`` is set only when continuing as new."""

    conversation_id: str
    store: str = "main"
    write_timeout_seconds: float = DEFAULT_WRITE_TIMEOUT_SECONDS
    max_turns_per_run: int = 500
    """Continue-as-new after this many user turns in one run (or earlier, when Temporal
    suggests it because the history is large); the state carries over whole."""
    state: Optional["ConversationState"] = None


class UserMessage(BaseModel):
    """Input of the ``send_message`` update: one user message (non-empty, at most 8 KB UTF-8)."""

    text: str


class AssistantReply(BaseModel):
    """What ``send_message`` returns: the assistant's reply to that message, the
    conversation's status after it, and the detail awaiting confirmation, if any."""

    text: str
    turn: int
    status: str
    awaiting_confirmation: Optional[str] = None


class CancelRequest(BaseModel):
    """Input of the ``cancel`` signal."""

    reason: str = "cancelled by the backend"


class SupportOutcome(BaseModel):
    """Result of ``SupportWorkflow``: final status and the final state."""

    status: str
    state: "ConversationState"


from workflows.state import ConversationState  # noqa: E402  (after the models that reference it)

SupportInput.model_rebuild()
SupportOutcome.model_rebuild()
