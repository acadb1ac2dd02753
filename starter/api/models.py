"""Request and response bodies of the HTTP API (``starter.api.application``), the types of its path
ids and free text (ASCII ids, no control characters), and the shared ``client_dep``
dependency of its routers."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from fastapi import HTTPException, Path, Query, Request, status
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool

from starter.client.conversations import StatekeeperClient
from starter.client.listing import FILTER_VALUE, PAGE_TOKEN_VALUE
from starter.client.refusals import NEW_CONVERSATION_ID_CHARS
from workflows.domain.contracts import AssistantReply
from workflows.domain.user_text import MAX_USER_MESSAGE_BYTES
from workflows.domain.user_text import (FREE_TEXT_PATTERN, LAYOUT_CONTROLS, MESSAGE_PATTERN, message_problem,
                                 refuse_controls, visible_text)

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]*$"
"""Conversation ids, message ids and store names: URL-path safe, so ``/conversations/{id}`` round-trips."""
PATH_ID_PATTERN = r"^[^\x00-\x1f\x7f-\x9f/" + LAYOUT_CONTROLS + "]+$"
"""An id in a path: any id a backend gave (the Python client takes any text), but never a
control character (nor a separator or bidirectional control); ids the API itself accepts are
``ID_PATTERN``."""

MAX_BODY_BYTES = 128 * 1024
"""Any request body larger than this is refused with 413 before it is parsed."""

# Only documented here (maxLength, pattern: at least one visible character), checked by
# check_message: an empty or oversized text gets the conversation's own words
# ("message text is empty", "message is 9216 bytes; the limit is 8192 bytes")
MessageText = Annotated[str, Field(json_schema_extra={"pattern": MESSAGE_PATTERN, "maxLength": MAX_USER_MESSAGE_BYTES},
                                   description="The user's words: at least one visible character, at most "
                                               f"{MAX_USER_MESSAGE_BYTES} bytes of UTF-8, no control characters "
                                               "(tab, line feed and carriage return are text)."),
                        refuse_controls("text")]
"""A user message as the API takes it; emptiness and the byte limit are ``message_problem``'s."""


def FreeText(max_length: int, what: str, min_length: int = 1) -> object:  # noqa: N802 (a type factory)
    """``Annotated[str, ...]`` of free text (a reason, a note): ``min_length`` to
    ``max_length`` characters, no control characters, passed on as its ``visible_text``
    (invisible characters removed, unusual spaces plain)."""
    return Annotated[str, Field(min_length=min_length, max_length=max_length,
                                json_schema_extra={"pattern": FREE_TEXT_PATTERN}),
                     refuse_controls(what), AfterValidator(visible_text)]


def PathId(name: str, max_length: int = 256) -> object:  # noqa: N802 (a type factory)
    """``Annotated[str, Path(...)]`` of an id in the URL path: no control characters or slashes."""
    return Annotated[str, Path(min_length=1, max_length=max_length, json_schema_extra={"pattern": PATH_ID_PATTERN},
                               description=f"The {name}."),
                     refuse_controls(f"the {name}", is_id=True)]


ConversationId = PathId("conversation id")


def filter_query() -> Any:
    """A list filter parameter (``GET /conversations``, ``GET /refunds``): optional, the
    same rule as ``starter.client.listing.clause`` (so the OpenAPI document states it)."""
    return Query(None, max_length=128, pattern=FILTER_VALUE,
                 description="An id of ASCII letters, digits and #._:@- (at most 128 characters).")


ConversationStatusFilter = Annotated[
    Optional[Literal["active", "ended", "cancelled", "transferred", "escalated", "terminated", "timed_out", "failed",
                     "stuck"]],
    Query(description="A conversation's status (workflows.domain.records.ConversationStatus: terminated, timed_out "
                      "and failed for a run Temporal ended), or stuck: running, but its workflow tasks keep failing; "
                      "another value is a 422")]
"""The ``status`` filter of ``GET /conversations``: one of the statuses a conversation sets,
as ``GET /refunds`` takes only a refund's (any id-shaped word was taken, so a typo such as
``activ`` listed nothing with a 200), and ``stuck`` (``starter.client.run_status.STUCK``), which
Temporal reports and no state stores."""


def page_token_query() -> Any:
    """The ``next_page_token`` parameter of a list: optional, URL-safe base64."""
    return Query(None, max_length=4100, pattern=PAGE_TOKEN_VALUE,
                 description="The next_page_token of the previous page of the same list, unchanged.")
RefundId = PathId("refund id")
ApprovalId = PathId("approval id", max_length=1100)


class StartConversation(BaseModel):
    """Body of ``POST /conversations``; every field optional (a UUID id, store ``main``).
    With ``text``, the first message is sent in the same call (``message_id`` its id)."""

    model_config = ConfigDict(extra="forbid")

    conversation_id: Optional[str] = Field(default=None, min_length=1, max_length=NEW_CONVERSATION_ID_CHARS,
                                           pattern=ID_PATTERN)
    store: str = Field(default="main", min_length=1, max_length=64, pattern=ID_PATTERN)
    text: Optional[MessageText] = None
    message_id: Optional[str] = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN)


class ConversationCreated(BaseModel):
    """Response of ``POST /conversations``: ``reply`` is set when the body had ``text`` (else
    null), with the fields of a message's reply, nulls included (never left out)."""

    conversation_id: str
    reply: Optional[AssistantReply] = None


class MessageIn(BaseModel):
    """Body of ``POST /conversations/{id}/messages``. The text is refused (422) with the
    conversation's own words when it is empty, over 8192 bytes or holds a control
    character (``check_message``). ``message_id`` makes a retry safe: the same id returns
    the first reply and runs once."""

    model_config = ConfigDict(extra="forbid")

    text: MessageText
    message_id: Optional[str] = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN)


class CancelIn(BaseModel):
    """Body of ``POST /conversations/{id}/cancel``; the body itself may be omitted."""

    model_config = ConfigDict(extra="forbid")

    reason: Optional[FreeText(1000, "the reason")] = None  # type: ignore[valid-type]
    """None: the workflow's default reason (``CancelRequest``)."""
    rollback: StrictBool = False
    """JSON ``true`` (no ``"yes"``, ``1`` or ``"on"``: a consequential flag is not guessed): undo the conversation's reversible writes (address changes) by their
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
    note: Optional[FreeText(1000, "the note", min_length=0)] = None  # type: ignore[valid-type]


def check_message(text: str) -> None:
    """Refuse (422) a message the conversation would refuse (empty, a control character,
    over 8192 bytes: ``workflows.domain.user_text.message_problem``, the validator's own words),
    before it becomes a Temporal payload."""
    problem = message_problem(text)
    if problem is not None:
        raise HTTPException(422, detail=problem)


async def client_dep(request: Request) -> StatekeeperClient:
    """The app's ``StatekeeperClient`` (connected on first use); 503 while Temporal is unreachable."""
    try:
        return await request.app.state.ensure_client()
    except Exception as err:  # noqa: BLE001 (any connection failure is the same 503 to the caller)
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail="Temporal is not reachable") from err
