"""How the client words a refused call: a failed update by its ``ErrorType``, an RPC refusal
by the server's status text, and ids refused before sending (``starter.client.conversations``)."""

from __future__ import annotations

from typing import Any, Optional, TypeVar

from pydantic import BaseModel, ValidationError

from temporalio.client import WorkflowUpdateFailedError
from temporalio.service import RPCError

from starter.client.errors import ConversationError, unreachable
from starter.client.temporal_ids import too_long
from workflows.domain.errors import ErrorType
from workflows.conversation.workflow import support_workflow_id
from workflows.domain.user_text import id_problem

FINISHED_HINT = "start a new conversation"
ID_PREFIXES = {"conversation_id": support_workflow_id(""), "message_id": "msg-"}
"""What the client puts before each id to make the workflow or update id Temporal stores."""


def check_ids(**ids: Optional[str]) -> None:
    """Refuse (``invalid``) an id with a control character: it would become part of a
    workflow or update id and of every log line and list that shows it; and one too long for
    the workflow or update id it becomes (Temporal's refusal read as "not reachable")."""
    for name, value in ids.items():
        what = f"the {name.replace('_', ' ')}"
        problem = id_problem(value, what) if value is not None else None
        if problem is None and value is not None and name in ID_PREFIXES:
            problem = too_long(value, ID_PREFIXES[name], what)
        if problem is not None:
            raise ConversationError(problem, "invalid")


NEW_CONVERSATION_ID_CHARS = 128
"""The longest id a conversation is started with, as over HTTP (``starter.api.models``):
every key made from it (``{tool}:{order or user}:{id}.t{turn}`` and the email, ticket and
approval-expiry keys around it) then fits the systems' bounds, the retail ledger's, outbox's
and tickets' 256 characters and the email and ticketing services' 300. A longer id, which
the Python client took up to Temporal's bound, committed an order's write, then failed on
PostgreSQL or at a service (money not moved, an email not sent)."""


def check_new_conversation_id(conversation_id: str) -> None:
    """Refuse (``invalid``, naming the sizes, not the id) a conversation id over
    ``NEW_CONVERSATION_ID_CHARS`` characters, before anything is started."""
    if len(conversation_id) > NEW_CONVERSATION_ID_CHARS:
        raise ConversationError(f"the conversation id is {len(conversation_id)} characters; a conversation is "
                                f"started with one of at most {NEW_CONVERSATION_ID_CHARS}", "invalid")


M = TypeVar("M", bound=BaseModel)


def built(model: type[M], refusal: str, **fields: Any) -> M:
    """``model(**fields)``, or ``ConversationError(refusal, "invalid")`` when they do not
    validate: a caller's bad argument is a refusal like any other, not pydantic's
    ``ValidationError`` (whose text quotes the value) escaping the client."""
    try:
        return model(**fields)
    except ValidationError as err:
        raise ConversationError(refusal, "invalid") from err


def finished(conversation_id: str) -> str:
    """The refusal text for a message to a conversation that has finished."""
    return f"conversation {conversation_id} has finished; {FINISHED_HINT}"


def untyped(err: WorkflowUpdateFailedError) -> bool:
    """True when the update failed without one of our ``ErrorType``s (its run closed under it)."""
    return getattr(err.cause, "type", None) not in {t.value for t in ErrorType}


def update_refusal(conversation_id: str, err: WorkflowUpdateFailedError) -> ConversationError:
    """A failed update as a refusal: its ``ErrorType`` decides the kind; the message of our
    own ``ApplicationError`` is already written for users."""
    cause = err.cause
    error_type = getattr(cause, "type", None)
    message = getattr(cause, "message", None) or ""
    if error_type == ErrorType.INVALID_MESSAGE.value:
        return ConversationError(message, "invalid_message")
    if error_type == ErrorType.UNKNOWN_STORE.value:
        return ConversationError(message, "invalid")
    if error_type == ErrorType.STATE_INCOMPATIBLE.value:
        return ConversationError(message, "state_incompatible")
    if error_type == ErrorType.AWAITING_RESOLUTION.value:
        return ConversationError(message, "conflict")
    if error_type == ErrorType.CONVERSATION_FINISHED.value or FINISHED_HINT in message:
        return ConversationError(message if FINISHED_HINT in message else finished(conversation_id), "finished")
    # the workflow closed while the update waited (a cancel race), or a handler failed
    return ConversationError(finished(conversation_id), "finished")


def rpc_reason(conversation_id: str, err: RPCError) -> tuple[str, str]:
    """``(message, kind)`` of a definite RPC refusal: finished, not_found, else unavailable."""
    # the server's message quotes the workflow id, which is caller-chosen text: blank it first
    # (only the whole workflow id: blanking the bare id "o" would also blank "not found")
    text = str(err).replace(support_workflow_id(conversation_id), "<id>").lower()
    if "completed" in text or "closed" in text or "closing" in text:
        return finished(conversation_id), "finished"
    if "not found" in text:
        return f"conversation {conversation_id} does not exist", "not_found"
    return str(unreachable()), "unavailable"
