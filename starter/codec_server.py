"""The codec server: Temporal's remote codec protocol over HTTP, so the Web UI (and
``temporal`` CLI users) read decrypted inputs, results, summaries and current details.

``POST /encode`` and ``POST /decode`` take and answer the JSON form of
``temporal.api.common.v1.Payloads`` (``{"payloads": [{"metadata": {...}, "data": "<base64>"}]}``,
the proto3 JSON mapping); the Web UI sends an ``X-Namespace`` header and calls from its own
origin, so CORS allows the configured origins (default: the embedded Web UI). Served by
``statekeeper codec-server`` and, beside the dev server, by ``statekeeper dev``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from typing import Any, AsyncIterator, Optional, Sequence

import typer
import uvicorn
from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads
from temporalio.converter import PayloadCodec

from settings import Settings
from starter.body_limit import install_body_limit
from starter.codec import CodecKeyError, payload_codec
from starter.logs import configure_logging
from starter.preflight import StartupRefused

log = logging.getLogger("statekeeper.codec_server")

BODY_LIMIT_BYTES = 16 * 1024 * 1024
"""A request holds at most this much JSON (a page of history's payloads; one payload is <= 2 MB)."""


def cors_origins(settings: Settings) -> list[str]:
    """Origins allowed to call the codec server: ``codec_cors_origins``, else the embedded
    Web UI's (``127.0.0.1`` and ``localhost`` on ``ui_port``)."""
    if settings.codec_cors_origins:
        return [o.strip().rstrip("/") for o in settings.codec_cors_origins.split(",") if o.strip()]
    return [f"http://127.0.0.1:{settings.ui_port}", f"http://localhost:{settings.ui_port}"]


def codec_app(codec: PayloadCodec, origins: Sequence[str], dependencies: Sequence[Any] = ()) -> FastAPI:
    """The codec server's app over ``codec``. ``dependencies`` run before each route (e.g. a
    caller's authentication, ``fastapi.Depends(...)``). A body that is not a JSON ``Payloads`` message gets 422
    ``{"detail"}``; a payload that does not decrypt with the configured keys, 422 too (the
    detail names the key id, never a key)."""
    app = FastAPI(title="statekeeper codec server", docs_url=None, redoc_url=None, openapi_url=None,
                  dependencies=list(dependencies))
    app.add_middleware(CORSMiddleware, allow_origins=list(origins), allow_methods=["POST"],
                       allow_headers=["content-type", "x-namespace", "authorization"], allow_credentials=True)
    install_body_limit(app, BODY_LIMIT_BYTES)

    async def apply(request: Request, encode: bool) -> Response:
        try:
            payloads = json_format.Parse(await request.body(), Payloads())
        except (json_format.ParseError, UnicodeDecodeError, RecursionError):
            return JSONResponse(status_code=422, content={"detail": 'the body must be {"payloads": [...]}'})
        try:
            done = await (codec.encode if encode else codec.decode)(payloads.payloads)
        except CodecKeyError as err:
            return JSONResponse(status_code=422, content={"detail": str(err)})
        return Response(json_format.MessageToJson(Payloads(payloads=done)), media_type="application/json")

    @app.post("/encode")
    async def encode(request: Request) -> Response:
        """Encrypt the payloads with the current key."""
        return await apply(request, encode=True)

    @app.post("/decode")
    async def decode(request: Request) -> Response:
        """Decrypt the payloads (payloads not encrypted by us come back unchanged)."""
        return await apply(request, encode=False)

    return app


def _codec_or_refuse(settings: Settings) -> PayloadCodec:
    codec = payload_codec(settings)
    if codec is None:
        raise StartupRefused("payload encryption is off (STATEKEEPER_CODEC_ENABLED=false): there is nothing to decode")
    return codec


def loopback(host: str) -> bool:
    """True when ``host`` is a loopback interface (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _server(app: FastAPI, host: str, port: int) -> uvicorn.Server:
    # log_config=None: uvicorn's records go through the root logger and its redaction
    return uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_config=None, log_level="warning"))


@contextlib.asynccontextmanager
async def codec_beside(settings: Settings, host: str = "127.0.0.1", port: Optional[int] = None) -> AsyncIterator[str]:
    """Serve the codec server in this event loop while the block runs (``statekeeper dev``);
    yields its base URL. Raises ``OSError`` if the port is taken, ``StartupRefused`` when
    encryption is off or has no key."""
    port = settings.codec_port if port is None else port
    server = _server(codec_app(_codec_or_refuse(settings), cors_origins(settings)), host, port)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            with contextlib.suppress(SystemExit):  # uvicorn exits its loop when it cannot bind
                task.result()
            raise OSError(f"the codec server could not listen on {host}:{port}")
        await asyncio.sleep(0.05)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        await task


async def codec_for_dev(stack: contextlib.AsyncExitStack, settings: Settings) -> str:
    """``statekeeper dev``: serve the codec server on loopback inside ``stack`` (the key exists
    by then); returns its URL, or why it is not served (off, or the port is taken: the Web UI
    then shows payloads still encrypted)."""
    if not settings.codec_enabled:
        return "off (STATEKEEPER_CODEC_ENABLED=false)"
    try:
        return await stack.enter_async_context(codec_beside(settings))
    except OSError as err:
        return f"not served ({err}; set STATEKEEPER_CODEC_PORT)"


def codec_server(host: str = typer.Option("127.0.0.1", help="Interface to listen on (loopback only)."),
                 port: Optional[int] = typer.Option(None, help="TCP port (default STATEKEEPER_CODEC_PORT).")) -> None:
    """Serve the codec server (POST /encode, /decode) for the Web UI with the configured keys."""
    from starter.cli import _interruptible, _settings

    configure_logging(logging.INFO)
    with _interruptible():
        settings = _settings()
        if not loopback(host):
            # it decrypts whatever it is sent: until it checks callers' keys, only this machine reaches it
            raise StartupRefused(f"the codec server decrypts whatever it is sent; it listens on loopback only, "
                                 f"not {host} (put an authenticating proxy in front of it)")
        port = settings.codec_port if port is None else port
        app = codec_app(_codec_or_refuse(settings), cors_origins(settings))
        log.info("codec server on http://%s:%s for %s", host, port, ", ".join(cors_origins(settings)))
        asyncio.run(_server(app, host, port).serve())
