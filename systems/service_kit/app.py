"""A service's FastAPI app: the fault control endpoints and the connection drop."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.engine import Engine

from systems.retail.engine import make_engine
from systems.service_kit.effects import DropConnection, Effects
from systems.service_kit.faults import ArmFaults, FaultBoard
from systems.service_kit.limits import BodyLimit


class DropMiddleware:
    """Pure ASGI middleware: an effect that raised ``DropConnection`` gets a response that
    starts and never completes, so the server closes the connection and the caller sees no
    answer (whether the work committed depends on the fault)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        except DropConnection:
            # a declared body that never comes: uvicorn closes the transport
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"64")]})


def service_app(title: str, url: str, metadata: Any) -> tuple[FastAPI, Effects]:
    """A FastAPI app named ``title`` on the database at ``url`` (SQLite file or PostgreSQL;
    ``metadata``'s tables are created), with ``POST/GET/DELETE /_faults`` and request bodies
    of at most ``limits.MAX_BODY_BYTES`` (413 above). Returns the app
    and its ``Effects`` (how the service's routes run their writes)."""
    engine: Engine = make_engine(url)
    metadata.create_all(engine)
    board = FaultBoard()
    effects = Effects(engine, board)
    app = FastAPI(title=title)
    app.add_middleware(DropMiddleware)
    app.add_middleware(BodyLimit)  # outermost: an oversized body is refused before anything else
    app.state.effects = effects

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        # FastAPI's shape without the refused input: an unpaired surrogate in it cannot be
        # encoded into the answer (a 500), and the caller sent it anyway
        errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
                  for e in err.errors()]
        return JSONResponse(status_code=422, content={"detail": errors})

    @app.post("/_faults", status_code=204)
    def arm(faults: ArmFaults) -> None:
        """Inject ``kind`` into the next ``count`` effect requests (tests and the chaos suite)."""
        board.arm(faults)

    @app.delete("/_faults", status_code=204)
    def clear() -> None:
        """Disarm every armed fault."""
        board.clear()

    @app.get("/_faults")
    def injected() -> dict[str, int]:
        """How many faults of each kind were injected."""
        return dict(board.injected)

    return app, effects
