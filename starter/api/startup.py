"""One line, not a traceback, when the served app (``uvicorn starter.api:app``, the compose
``api`` service) refuses to start.

Why: the app reads its settings and its keys when it starts; a refusal (no API keys where its
bind is unknown, an unreachable journal database: ``StartupRefused``) or an invalid setting
(pydantic's ``ValidationError``) reached the container's log as Starlette's formatted traceback
ending ``starter.runtime.preflight.StartupRefused: ...``. ``statekeeper api`` says the same in one line.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from pydantic import ValidationError

from starter.runtime.preflight import StartupRefused

Scope = dict[str, Any]
Message = dict[str, Any]


class OneLineStartupRefusal:
    """ASGI middleware: a startup that fails with ``StartupRefused`` or an invalid setting is
    reported to the server (uvicorn logs it) as ``statekeeper: <why>``; any other failure keeps
    the framework's report. The server then exits as it would anyway."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        held: list[Message] = []

        async def send_held(message: Message) -> None:
            if message["type"] == "lifespan.startup.failed":
                held.append(message)  # sent below, once the failure's kind is known
                return
            await send(message)

        try:
            await self.app(scope, receive, send_held)
        except (StartupRefused, ValidationError) as err:
            await send({"type": "lifespan.startup.failed", "message": f"statekeeper: {refusal_line(err)}"})
            raise
        except BaseException:
            for message in held:
                await send(message)
            raise
        for message in held:
            await send(message)


def refusal_line(err: BaseException) -> str:
    """What a refused startup says: the refusal itself, or ``invalid setting: ...`` naming each
    setting as the commands do (``starter.cli.refusals.settings_problems``)."""
    if isinstance(err, ValidationError):
        from starter.runtime.problems import settings_problems

        return f"invalid setting: {settings_problems(err)}"
    return str(err)
