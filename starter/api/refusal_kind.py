"""The ``Refusal-Kind`` header: every refusal of the HTTP API (status 400 and above) names its
kind, so a backend service tells a ``stuck`` 409 from a ``finished`` or a ``conflict`` one, and
an ``outcome_unknown`` 503 from an ``unavailable`` one, without reading the words of ``detail``.

A ``ConversationError``'s answer carries its own ``kind`` (``with_kind``); any other
refusal (a body over the limit, a malformed request, an unknown path, a middleware's 401)
gets the kind its status stands for (``STATUS_KINDS``), added by ``RefusalKind``, the outermost
middleware.
"""

from __future__ import annotations

from typing import Any, Optional

from starter.client.errors import ConversationError

HEADER = "Refusal-Kind"
STATUS_KINDS: dict[int, str] = {
    400: "invalid", 401: "unauthenticated", 403: "forbidden", 404: "not_found", 405: "invalid", 409: "conflict",
    413: "too_large", 422: "invalid", 429: "rate_limited", 503: "unavailable", 504: "timeout",
}
"""The kind of a refusal that did not name one, by its status (any other status: ``internal``)."""


def with_kind(err: ConversationError, headers: Optional[dict[str, str]] = None) -> dict[str, str]:
    """``headers`` (default none) with ``Refusal-Kind: <err.kind>``."""
    return {**(headers or {}), HEADER: err.kind}


class RefusalKind:
    """ASGI middleware: a response of status 400 or above without ``Refusal-Kind`` gets the one
    ``STATUS_KINDS`` gives its status."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_kind(message: dict) -> None:
            if message["type"] == "http.response.start" and message.get("status", 200) >= 400:
                headers = list(message.get("headers") or [])
                if not any(name.lower() == b"refusal-kind" for name, _ in headers):
                    kind = STATUS_KINDS.get(message["status"], "internal")
                    message = {**message, "headers": [*headers, (b"refusal-kind", kind.encode("ascii"))]}
            await send(message)

        await self.app(scope, receive, send_with_kind)
