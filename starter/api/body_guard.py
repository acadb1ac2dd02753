"""Bounded reading of request bodies: a body that is not UTF-8, holds a raw control
character, or nests deeper than ``MAX_JSON_DEPTH`` is refused with 422 ``{"detail"}``
before any JSON parser sees it.

Python's ``json`` parser recurses once per nesting level: ``[[[…]]]`` a few thousand deep
raises ``RecursionError``, which FastAPI answers with a 400 in another shape, and anything
else that parsed such a document (a model's answer, a stored record) would fail the same
way. The depth is measured here with one linear scan and no recursion, on the body that
``starter.api.body_limit`` has already bounded in size (it must stay the outer middleware).
"""

from __future__ import annotations

import re
from typing import Any, Awaitable, Callable, Optional

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from starter.api.body_limit import install_body_limit

Receive = Callable[[], Awaitable[dict[str, Any]]]

MAX_JSON_DEPTH = 32
"""Deepest nesting of arrays and objects any request body may have (ours need 3)."""
_RAW_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
"""Characters JSON allows nowhere unescaped (RFC 8259: whitespace is tab, LF, CR, space)."""


def json_depth(text: str, limit: int = MAX_JSON_DEPTH) -> int:
    """The nesting depth of the JSON text ``text`` (arrays and objects; brackets inside
    strings do not count), counted up to ``limit + 1`` and no further. One pass, constant
    memory, no recursion; never raises (malformed JSON is the parser's business)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif char in "]}":
            depth -= 1
    return deepest


def body_problem(body: bytes) -> Optional[str]:
    """Why a request body is refused before parsing, or None: not UTF-8, a raw control
    character (which JSON never allows; it is also how UTF-16 text looks as bytes), or
    nested deeper than ``MAX_JSON_DEPTH``."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"invalid request: the body is not valid UTF-8 (byte {err.start})"
    raw = _RAW_CONTROL.search(text)
    if raw is not None:
        return (f"invalid request: the body contains a raw control character (U+{ord(raw.group(0)):04X} at "
                f"position {raw.start()}); JSON text must escape it")
    if json_depth(text) > MAX_JSON_DEPTH:
        return f"invalid request: the body nests arrays or objects deeper than {MAX_JSON_DEPTH} levels"
    return None


def validation_reasons(errors: "list[Any]") -> str:
    """A request that FastAPI refused, as the 422's reason: each error's place and message, and a
    body that is not JSON said so with its position ("body.43: JSON decode error" read as if a
    field named 43 were wrong)."""
    def one(error: Any) -> str:
        loc = list(error.get("loc", ()))
        if error.get("type") == "json_invalid":
            at = f" (at character {loc[1]})" if len(loc) > 1 and isinstance(loc[1], int) else ""
            return f"the body is not valid JSON{at}"
        return f"{'.'.join(str(p) for p in loc)}: {error.get('msg', '')}"
    return "invalid request: " + "; ".join(one(e) for e in errors)


class BodyGuard:
    """ASGI middleware: ``BodyGuard(app)``; refuses a non-empty body that ``body_problem``
    finds fault with (422 ``{"detail"}``) and passes every other request on unchanged."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # ``BodyLimit`` (outside) has read and bounded the body: this reads at most its limit
        messages, chunks, more = [], [], True
        while more:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        problem = body_problem(body) if body else None
        if problem is not None:
            await JSONResponse(status_code=422, content={"detail": problem})(scope, receive, send)
            return
        pending = messages

        async def replay() -> dict[str, Any]:
            return pending.pop(0) if pending else await receive()

        await self.app(scope, replay, send)


def install_body_checks(app: FastAPI, limit: int) -> None:
    """Bound every request body: at most ``limit`` bytes (413, ``starter.api.body_limit``),
    then ``body_problem`` (422). The size limit is the outer middleware, so the guard never
    holds more than ``limit`` bytes."""
    app.add_middleware(BodyGuard)
    install_body_limit(app, limit)  # added last: outermost
