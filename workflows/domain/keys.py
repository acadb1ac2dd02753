"""Effect keys from business identity: idempotency keys, ticket and email keys, and
the refund workflow's id.

Every key is built from what survives a workflow reset: the conversation id (one
workflow per id, never reused), the user turn that proposed the operation (turns are
counted in the state, deterministically), the tool and the order or customer it
changes. Never ``workflow.uuid4()``, whose values change when a reset re-executes the
workflow, and never model text. A turn proposes at most one write (a write proposal
ends the turn with its confirmation prompt), so ``(conversation, turn)`` names it.
"""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple, Optional

from workflows.domain.catalogue import spec_of


def operation_id(conversation_id: str, turn: int) -> str:
    """The operation proposed at user turn ``turn`` of a conversation: ``<conversation>.t<turn>``."""
    return f"{conversation_id}.t{turn}"


def operation_turn(operation_id: str) -> int:
    """The user turn that proposed ``operation_id`` (the inverse of ``operation_id``). Raises
    ValueError for another shape."""
    _, sep, turn = operation_id.rpartition(".t")
    if not sep or not (turn.isascii() and turn.isdigit()):
        raise ValueError(f"not an operation id: {operation_id!r}")
    return int(turn)


def idempotency_key(call: Any, operation: str) -> str:
    """The idempotency key of a write: ``{tool}:{order_id or user_id}:{operation}``.

    A retried, replayed or reset-and-re-executed write maps to the same ledger row; the
    same key with other arguments is refused by the system of record as a conflict."""
    subject = spec_of(call.name).subject
    value = getattr(call.arguments, subject) if subject else "-"
    return f"{call.name}:{value}:{operation}"


def transfer_ticket_key(conversation_id: str, turn: int) -> str:
    """The hand-off ticket of a transfer the model proposed at user turn ``turn``."""
    return f"transfer:{conversation_id}:t{turn}"


def compensation_operation(operation_id: str) -> str:
    """The operation id of the compensation of write ``operation_id`` (one undo per write):
    its idempotency key is ``idempotency_key(compensation_call, compensation_operation(op))``."""
    return f"{operation_id}.undo"


def approval_expiry_ticket_key(write_key: str) -> str:
    """The human ticket opened when the approval of the write ``write_key`` expires (one per write)."""
    return f"approval-expired:{write_key}"


def rollback_ticket_key(conversation_id: str) -> str:
    """The ticket opened when a rollback cancel could not undo every reversible write (one
    per conversation: it is cancelled once)."""
    return f"rollback:{conversation_id}"


def escalation_ticket_key(write_key: str) -> str:
    """The ticket opened when a write's outcome cannot be shown (one per write)."""
    return f"escalate:{write_key}"


def email_key(write_key: str) -> str:
    """The customer email sent after a write (one per write)."""
    return f"email:{write_key}"


def refund_workflow_id(store: str, order_id: str, operation: str) -> str:
    """Workflow id of a refund: business identity, so a second start is rejected by Temporal."""
    return f"refund-{store}-{order_id.lstrip('#')}-{operation}"


def standalone_operation_id(request_id: str, store: str = "main") -> str:
    """The operation of a backend's standalone refund request: ``<request_id>.req`` on store
    ``main``, ``<store>.<request_id>.req`` on any other.

    Disjoint from conversation operations (``<conversation>.t<turn>``: they end in ``.t``
    and digits, this ends in ``.req``, and a request id holds no ``.``), so a request and
    a conversation turn never share an idempotency key. The store is part of it because
    two stores (two tenants' systems) number their orders alike and the payments, email and
    ticketing services key every store's effects in one table: without it, the same request
    id on the same order id in a second store met the first's payments key and its money
    never moved. ``main`` keeps the form it always had; the last ``.`` before ``.req``
    separates the store (which may hold dots) from the request id (which holds none)."""
    return f"{request_id}.req" if store == "main" else f"{store}.{request_id}.req"


def standalone_refund_id(store: str, order_id: str, request_id: str) -> str:
    """The workflow id (``refund_id``) of a standalone refund request: the store, the order
    and the caller's request id, so a repeated request names the same run.

    ``refund-{store}-{order without #}-{request_id}.r{10 hex}``: URL-safe when its parts
    are (the API admits only ``[A-Za-z0-9._:@-]``); the hex is SHA-256 of the three parts
    with separators, because ``-`` may occur inside a store or request id and the readable
    part alone could name two different requests."""
    tag = hashlib.sha256(f"{store}\x00{order_id}\x00{request_id}".encode()).hexdigest()[:10]
    return f"{refund_workflow_id(store, order_id, request_id)}.r{tag}"


# --- reading keys back (erasure and retention find a customer's or a conversation's records) ---


class KeyRef(NamedTuple):
    """What a record key refers to: ``conversation`` whose operation made it (None for a
    standalone request or a key of another form), ``subject`` the order or customer id a
    write changed (None when the key names no write), ``standalone`` True for a backend's
    standalone request (operation ``<request_id>.req``)."""

    conversation: Optional[str] = None
    subject: Optional[str] = None
    standalone: bool = False


_WRAPPED = ("email:", "escalate:", "approval-expired:")


def operation_conversation(operation: str) -> Optional[str]:
    """The conversation of operation ``<conversation>.t<turn>`` or of its compensation
    (``….undo``); None for a standalone request or any other form."""
    conversation, sep, turn = operation.removesuffix(".undo").rpartition(".t")
    return conversation if sep and conversation and turn.isascii() and turn.isdigit() else None


def key_ref(key: str) -> KeyRef:
    """Read back a key this module built: an idempotency key (``{tool}:{subject}:{operation}``),
    an email, escalation or approval-expiry key around one, a transfer ticket
    (``transfer:{conversation}:t{turn}``) or a rollback ticket (``rollback:{conversation}``).
    Anything else gives an empty ``KeyRef``. Never raises."""
    for prefix in _WRAPPED:
        if key.startswith(prefix):
            return key_ref(key[len(prefix):])
    if key.startswith("transfer:"):
        conversation, sep, turn = key[len("transfer:"):].rpartition(":t")
        return KeyRef(conversation=conversation) if sep and conversation and turn.isascii() and turn.isdigit() else KeyRef()
    if key.startswith("rollback:"):
        return KeyRef(conversation=key[len("rollback:"):] or None)
    parts = key.split(":", 2)
    if len(parts) != 3 or not all(parts):
        return KeyRef()
    _tool, subject, operation = parts
    standalone = operation.endswith(".req")
    return KeyRef(conversation=None if standalone else operation_conversation(operation),
                  subject=None if subject == "-" else subject, standalone=standalone)


def standalone_refund_prefix(key: str, store: str) -> Optional[str]:
    """The readable start (``refund-{store}-{order without #}-{request_id}.r``) of the workflow
    id of the standalone refund whose request made the record keyed ``key`` in ``store`` (its
    idempotency key, or an email, escalation or approval-expiry key around it); None for a key
    of any other form. Retention keeps such a record while that refund runs.

    A prefix, not the whole id: the id's hex digests the order id as the request gave it (with
    or without ``#``), which the key does not keep; a prefix that also matches another request
    (``-`` inside a store or request id) only keeps a record longer, never erases one early."""
    for prefix in _WRAPPED:
        if key.startswith(prefix):
            return standalone_refund_prefix(key[len(prefix):], store)
    parts = key.split(":", 2)
    if len(parts) != 3 or not all(parts) or not parts[2].endswith(".req"):
        return None
    _tool, order_id, operation = parts
    request_id = operation.removesuffix(".req")
    if store != "main":
        if not request_id.startswith(f"{store}."):
            return None
        request_id = request_id[len(store) + 1:]
    if not request_id or "." in request_id:
        return None
    return refund_workflow_id(store, order_id, request_id) + ".r"
