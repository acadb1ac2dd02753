"""What the simulated services accept: text without NUL characters or unpaired surrogates
(``Text``, a pydantic type: 422 naming the field), and request bodies of at most
``MAX_BODY_BYTES`` (``BodyLimit``, ASGI middleware: 413), refused before anything is parsed or
stored.

A NUL is refused by PostgreSQL's text columns and stored as-is by SQLite: the same request
would be accepted by one database and refused by the other, so the service refuses it
itself, the same on both. An unpaired surrogate (JSON allows ``"\\ud800"``; pydantic refuses
it in a plain ``str`` field but lets it through an optional one) cannot be encoded as UTF-8
by either database: refused here, not a 500 from the insert.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Awaitable, Callable

from pydantic import AfterValidator

MAX_BODY_BYTES = 4 * 1024 * 1024
"""The largest request body a service reads (bytes): above the largest valid one (an erasure
naming 10,000 references of 300 characters)."""
Receive = Callable[[], Awaitable[dict[str, Any]]]


_SURROGATE = re.compile("[\ud800-\udfff]")


def _storable(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    if _SURROGATE.search(value):
        raise ValueError("must not contain unpaired surrogates (not a valid unicode string)")
    return value


Text = Annotated[str, AfterValidator(_storable)]
"""A string field without NUL characters or unpaired surrogates (constraints such as
``max_length`` go on ``Field``)."""


class BodyLimit:
    """ASGI middleware: ``BodyLimit(app, limit)`` answers 413 ``{"detail"}`` to a body over
    ``limit`` bytes, declared (``Content-Length``) or streamed (counted as it arrives, never
    held whole); other bodies reach ``app`` unchanged."""

    def __init__(self, app: Any, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length", b"")
        if length.isdigit() and int(length) > self.limit:
            await self._refuse(send)
            return
        chunks, received, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            received += len(chunks[-1])
            if received > self.limit:
                await self._refuse(send)
                return
            more = message.get("more_body", False)
        replay = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replayed() -> dict[str, Any]:
            return replay.pop() if replay else await receive()

        await self.app(scope, replayed, send)

    async def _refuse(self, send: Any) -> None:
        body = f'{{"detail":"the request body is over the limit of {self.limit} bytes; nothing was done"}}'.encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
