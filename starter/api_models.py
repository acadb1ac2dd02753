"""Request and response bodies of the HTTP API (``starter.api``), and the shared
``client_dep`` dependency of its routers."""

from __future__ import annotations

from typing import Literal, Optional

from fastapi import HTTPException, Request, status
from pydantic import BaseModel, ConfigDict, Field

from starter.client import StatekeeperClient
from workflows.contracts import AssistantReply

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]*$"
"""Conversation ids, message ids and store names: URL-path safe, so ``/conversations/{id}`` round-trips."""

MAX_REQUEST_TEXT_BYTES = 64 * 1024
"""Messages larger than this are refused here, before they become a Temporal payload.
Below it the workflow's own limit (8 KB) decides, so there is one source of truth for
valid messages; this cap only keeps very large bodies off the Temporal server."""
MAX_BODY_BYTES = 128 * 1024
"""Any request body larger than this is refused with 413 before it is parsed."""


class StartConversation(BaseModel):
    """Body of ``POST /conversations``; every field optional (a UUID id, store ``main``).
    With ``text``, the first message is sent in the same call (``message_id`` its id)."""

    model_config = ConfigDict(extra="forbid")

    conversation_id: Optional[str] = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN)
    store: str = Field(default="main", min_length=1, max_length=64, pattern=ID_PATTERN)
    text: Optional[str] = None
    message_id: Optional[str] = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN)


class Refusal(BaseModel):
    """Every refusal's body: the reason, written for the caller's user."""

    detail: str


CONVERSATION_REFUSALS: dict[int | str, dict[str, object]] = {
    409: {"model": Refusal, "description": (
        "The conversation has finished (ended, cancelled, transferred, escalated), the id is taken by "
        "another request, or its saved state cannot be loaded by this version (state_incompatible: saved "
        "by a newer version, without a valid schema_version, or invalid after migration; the detail says "
        "which, and the conversation's run has failed)")},
    404: {"model": Refusal, "description": "No conversation with this id"},
    503: {"model": Refusal, "description": "Temporal is not reachable, or no worker polls the task queue"},
}
"""OpenAPI ``responses`` of the conversation routes (``starter.api``)."""


class ConversationCreated(BaseModel):
    """Response of ``POST /conversations``: ``reply`` is set when the body had ``text``."""

    conversation_id: str
    reply: Optional[AssistantReply] = None


class MessageIn(BaseModel):
    """Body of ``POST /conversations/{id}/messages``. Emptiness and the 8 KB limit are
    checked by the workflow, so its reason reaches the caller verbatim. ``message_id``
    makes a retry safe: the same id returns the first reply and runs once."""

    model_config = ConfigDict(extra="forbid")

    text: str
    message_id: Optional[str] = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN)


class CancelIn(BaseModel):
    """Body of ``POST /conversations/{id}/cancel``; the body itself may be omitted."""

    model_config = ConfigDict(extra="forbid")

    reason: Optional[str] = Field(default=None, min_length=1, max_length=1000)
    """None: the workflow's default reason (``CancelRequest``)."""
    rollback: bool = False
    """True: undo the conversation's reversible writes (address changes) by their
    compensation; irreversible writes are never undone (README, "Cancellation")."""


class CancelAccepted(BaseModel):
    """Response of ``POST /conversations/{id}/cancel``: the signal was delivered; the
    conversation stops after any write already running finishes."""

    conversation_id: str
    status: str = "cancelling"


class DecisionIn(BaseModel):
    """Body of ``POST /approvals/{approval_id}``: the supervisor's decision and identity."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "reject"]
    approver: str = Field(min_length=1, max_length=128, pattern=ID_PATTERN)
    note: Optional[str] = Field(default=None, max_length=1000)


def check_text_size(text: str) -> None:
    """Refuse (422) a message far over the workflow's limit before it becomes a payload."""
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_REQUEST_TEXT_BYTES:
        raise HTTPException(422, detail=f"message is {size} bytes; the limit is 8192 bytes")


async def client_dep(request: Request) -> StatekeeperClient:
    """The app's ``StatekeeperClient`` (connected on first use); 503 while Temporal is unreachable."""
    try:
        return await request.app.state.ensure_client()
    except Exception as err:  # noqa: BLE001 (any connection failure is the same 503 to the caller)
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail="Temporal is not reachable") from err
