"""The one place where the HTTP API declares what each route may answer besides success:
every refusal status of every route, with the one body shape the API sends for all of
them (``Refusal``: ``{"detail": "<reason>"}``, and a ``Refusal-Kind`` header:
``starter.api.refusal_kind``). Routes take their ``responses=`` from
``responses_for(method, path)``, so the OpenAPI document lists exactly these; a route
missing here fails at import, and ``tests/e2e/test_api_docs.py`` checks the document
(and runs schemathesis, which fails on any status a route sends but does not declare).

To add a status to every route (e.g. 401/403 for authentication), extend ``COMMON``;
for some routes, their entries in ``ROUTES``; its wording goes in ``DESCRIPTIONS``.
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel

from starter.api.body_guard import MAX_JSON_DEPTH


class Refusal(BaseModel):
    """Every refusal's body: the reason, written for the caller's user (never an
    exception name, gRPC text or a stack trace)."""

    detail: str


DESCRIPTIONS: dict[int, str] = {
    401: "An API key is required (Authorization: Bearer <key>) and none, or not a valid one, was sent "
         "(starter.api.auth; the keyless loopback dev API never answers it to a loopback caller).",
    403: "This key's role may not do this (e.g. approving, cancelling or managing webhooks needs an operator key; refunds are "
         "not for customer-scoped keys).",
    404: "Not found: no conversation, refund, approval, transcript, webhook or delivery with this id.",
    409: "Conflict: the conversation (or the refund an approval belongs to) is stuck (Refusal-Kind: stuck): its "
         "workflow tasks keep failing, and nothing more is done in it until an operator acts; the detail says what "
         "fails and since when. The conversation has finished (ended, cancelled, transferred, escalated), or its saved "
         "state cannot be loaded by this version (state_incompatible: saved by a newer version, without a valid "
         "schema_version, or invalid after migration; the detail says which, and its run failed); an id or "
         "request id taken by another request; an approval refused (another operation's, already decided, "
         "expired, its process finished); a resolution refused (no such step, not unknown, already resolved, "
         "the conversation finished).",
    413: "The request body is over the limit (128 KB), whether declared by Content-Length or streamed.",
    422: "The request is malformed: a body that is not UTF-8 JSON, holds a raw control character or nests "
         f"deeper than {MAX_JSON_DEPTH} levels; a missing, unknown or invalid field, query or path parameter "
         "(ids are ASCII; free text must not contain control characters); a message that is empty or over "
         "8192 bytes; an unknown store; a list filter or page token that is not one this API accepts; a webhook URL "
         "that is not http(s), is over 2048 characters, does not resolve or resolves to an address webhooks may "
         "not reach, or an unknown event type.",
    429: "Too many requests: the API key sent more than its rate limit (the Retry-After header says in how many "
         "seconds to retry), or the tenant has as many conversations open as its limit allows.",
    503: "Unavailable: Temporal (or the journal's database) is not reachable, or no worker polls the task "
         "queue; the detail says which. Retry later.",
    504: "No answer within the deadline; send the same request again with the same ids to get it.",
}
"""What each refusal status means, as the OpenAPI document says it."""

COMMON: tuple[int, ...] = (413, 422)
"""Statuses every route may answer: the body checks run before any route (``starter.api.body_guard``)."""

AUTHENTICATED: tuple[int, ...] = (401, 403, 429)
"""Statuses of every route behind an API key (all but ``/healthz``; ``starter.api.guard``; 429:
the key's request rate, ``starter.api.limits``)."""

ROUTES: dict[tuple[str, str], tuple[int, ...]] = {
    ("GET", "/healthz"): (503,),
    ("POST", "/conversations"): (404, 409, 503, 504),  # 404: a scoped key reaching another customer
    ("GET", "/conversations"): (503,),
    ("GET", "/conversations/{conversation_id}"): (404, 409, 503, 504),
    ("POST", "/conversations/{conversation_id}/messages"): (404, 409, 503, 504),
    ("POST", "/conversations/{conversation_id}/cancel"): (404, 409, 503),
    ("GET", "/conversations/{conversation_id}/transcript"): (404, 503),
    ("GET", "/conversations/{conversation_id}/events"): (404, 409, 503),
    ("POST", "/conversations/{conversation_id}/resolutions"): (404, 409, 503, 504),
    ("POST", "/refunds"): (409, 503),
    ("GET", "/refunds"): (503,),
    ("GET", "/refunds/{refund_id}"): (404, 503),
    ("GET", "/refunds/{refund_id}/events"): (404, 409, 503),
    ("GET", "/approvals/{approval_id}"): (404, 409, 503, 504),
    ("POST", "/approvals/{approval_id}"): (404, 409, 503, 504),
    ("GET", "/approvals"): (503,),
    ("GET", "/usage"): (503,),
    ("GET", "/customers/{customer_id}/memory"): (404, 503),
    ("DELETE", "/customers/{customer_id}/memory/{fact_id}"): (404, 503),
    ("POST", "/webhooks"): (503,),
    ("GET", "/webhooks"): (503,),
    ("DELETE", "/webhooks/{webhook_id}"): (404, 503),
    ("GET", "/webhooks/{webhook_id}/deliveries"): (404, 503),
    ("POST", "/webhooks/{webhook_id}/deliveries/{delivery_id}/retry"): (404, 503),
}
"""Each route's own refusal statuses, besides ``COMMON``."""


def statuses_for(method: str, path: str) -> tuple[int, ...]:
    """Every refusal status of route ``method path`` (``COMMON`` first). Raises ``KeyError``
    for a route not declared in ``ROUTES``."""
    own = ROUTES[(method.upper(), path)]
    return COMMON + (own if path == "/healthz" else AUTHENTICATED + own)


def responses_for(method: str, path: str, extra: Optional[dict[int, dict[str, Any]]] = None
                  ) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` of route ``method path``: each of its refusal statuses with the
    ``Refusal`` model, plus ``extra`` (e.g. another content type of the 200). Raises
    ``KeyError`` for a route not declared in ``ROUTES``."""
    declared: dict[int | str, dict[str, Any]] = {
        status: {"model": Refusal, "description": DESCRIPTIONS[status]} for status in statuses_for(method, path)}
    declared.update(extra or {})
    return declared
