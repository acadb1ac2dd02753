"""The refusals of the client and the API: one exception, ``ConversationError``, whose
``kind`` names what went wrong, and the HTTP status of each kind.

The reason (``str(err)``) is written for the caller's user: it never carries exception
class names, gRPC text or stack traces.
"""

from __future__ import annotations

KIND_STATUS: dict[str, int] = {
    "invalid": 422,           # a request that can never succeed as sent (bad field, unknown store)
    "invalid_message": 422,   # a message the conversation refuses (empty, over 8 KB)
    "finished": 409,          # the conversation ended, was cancelled, transferred or escalated
    "conflict": 409,          # the id is taken by a different request
    "approval_refused": 409,  # unknown approval of a running process, second decision, expired
    "resolution_refused": 409,  # an operator's resolution of a step that is not unknown, or a second one
    "state_incompatible": 409,  # the conversation's saved state cannot be loaded by this version (its run failed)
    "stuck": 409,             # its workflow tasks keep failing: nothing moves until an operator acts (starter.client.run_status)
    "not_found": 404,         # also another tenant's process: invisible, not forbidden
    "unauthenticated": 401,   # no API key, or not a valid one (starter.api.auth)
    "forbidden": 403,         # the key's role or customer scope does not allow the action
    "rate_limited": 429,      # the key's request rate or the tenant's open conversations are at their limit
    "timeout": 504,           # accepted, but no answer within the deadline: retry with the same id
    "no_worker": 503,         # Temporal answers, but no worker polls the task queue
    "unavailable": 503,       # Temporal cannot be reached (or failed the request)
    "outcome_unknown": 503,   # an update (a message, a decision) may or may not have landed: send it again, same id
}
"""``ConversationError.kind`` → HTTP status; a kind not listed is a 503."""


class ConversationError(Exception):
    """A refused request. ``str(err)`` is the reason, meant for the caller's user; ``kind``
    is a key of ``KIND_STATUS`` (``invalid``, ``invalid_message``, ``finished``,
    ``conflict``, ``approval_refused``, ``state_incompatible``, ``stuck``, ``not_found``, ``unauthenticated``,
    ``forbidden``, ``timeout``, ``no_worker``, ``unavailable``, ``outcome_unknown``).
    ``message_id``: for ``outcome_unknown`` and a message refused as ``stuck``, the id to send
    the message again with."""

    def __init__(self, reason: str, kind: str = "unavailable", message_id: str | None = None) -> None:
        super().__init__(reason)
        self.kind, self.message_id = kind, message_id


def status_for(err: ConversationError) -> int:
    """HTTP status for a refused request, from ``err.kind`` (503 for an unknown kind: the
    infrastructure failed, not the caller)."""
    return KIND_STATUS.get(err.kind, 503)


def no_worker(task_queue: str) -> ConversationError:
    """No worker polls ``task_queue``: nothing would ever answer."""
    return ConversationError(f"no worker is polling task queue {task_queue}; start a worker and retry", "no_worker")


def unreachable(what: str = "Temporal") -> ConversationError:
    """The server did not answer within the deadline, or refused the connection."""
    return ConversationError(f"{what} is not reachable; retry later", "unavailable")


def outcome_unknown(what: str, retry: str, message_id: str | None = None,
                    cause: str = "Temporal is not reachable") -> ConversationError:
    """Temporal stopped answering while an update with a caller-supplied id (``what``: "the
    message", "the decision") was on its way: it may have been handled. Its id is the update
    id, so sending it again as ``retry`` says returns the answer of the one run instead of
    running it twice. ``message_id``: for a message, the id to send it with."""
    return ConversationError(
        f"{cause}, so whether {what} was received is unknown; {retry}: it is handled at "
        "most once and the retry returns its answer", "outcome_unknown", message_id=message_id)


def message_outcome_unknown(message_id: str, cause: str = "Temporal is not reachable") -> ConversationError:
    """``outcome_unknown`` of a user message: send it again with ``message_id``."""
    return outcome_unknown("the message", f'send it again with message_id "{message_id}"', message_id, cause)
