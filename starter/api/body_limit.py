"""A request-body limit that holds for every framing: a declared ``Content-Length`` above
the limit is refused at once, and a body streamed without one (chunked) is counted as it
arrives and refused as soon as it passes the limit, before it is parsed or held whole."""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from fastapi import FastAPI
from fastapi.responses import JSONResponse

Receive = Callable[[], Awaitable[dict[str, Any]]]


class BodyTooLarge(Exception):
    """The request body passed ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is over the limit of {limit} bytes")


class BodyLimit:
    """ASGI middleware: ``BodyLimit(app, limit)`` (bytes); answers 413 ``{"detail"}``."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length", b"")
        if length.isdigit() and int(length) > self.limit:
            await JSONResponse(status_code=413, content={"detail": str(BodyTooLarge(self.limit))})(scope, receive, send)
            return
        # read the body before the app sees it, holding at most ``limit`` bytes: a streamed
        # body is refused as soon as it passes the limit, whatever the app would do with it
        chunks, received, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message], receive), send)
                return
            chunks.append(message.get("body", b""))
            received += len(chunks[-1])
            if received > self.limit:
                await JSONResponse(status_code=413, content={"detail": str(BodyTooLarge(self.limit))})(
                    scope, receive, send)
                return
            more = message.get("more_body", False)
        body = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay([body], receive), send)


def _replay(messages: list[dict[str, Any]], then: Receive) -> Receive:
    """A ``receive`` that yields ``messages``, then the client's own (e.g. its disconnect)."""
    pending = list(messages)

    async def receive() -> dict[str, Any]:
        return pending.pop(0) if pending else await then()

    return receive


def install_body_limit(app: FastAPI, limit: int) -> None:
    """Refuse bodies over ``limit`` bytes with 413 ``{"detail": ...}``, however they are framed."""
    app.add_middleware(BodyLimit, limit=limit)
