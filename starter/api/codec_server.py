"""The codec server: Temporal's remote codec protocol over HTTP, so the Web UI (and
``temporal`` CLI users) read decrypted inputs, results, summaries and current details.

``POST /encode`` and ``POST /decode`` take and answer the JSON form of
``temporal.api.common.v1.Payloads`` (``{"payloads": [{"metadata": {...}, "data": "<base64>"}]}``,
the proto3 JSON mapping); the Web UI sends an ``X-Namespace`` header and calls from its own
origin, so CORS allows the configured origins (default: the embedded Web UI). Served by
``statekeeper codec-server`` and, beside the dev server, by ``statekeeper dev``.

Callers authenticate as the HTTP API's do (``starter.api.auth``): with API keys, an operator key
of the default tenant (``Authorization: Bearer <key>``; the ``temporal`` CLI's ``--codec-auth``):
the payloads of every tenant are encrypted under the same keys; keyless, loopback
callers only. Every call is written to the audit log (decrypting is reading personal data).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from typing import AsyncIterator, Optional, Sequence

import uvicorn
from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads
from temporalio.converter import PayloadCodec

from settings import Settings
from activities.store.audit import AuditLog
from starter.api.auth import Access, access_from_settings
from starter.api.body_limit import install_body_limit
from starter.runtime.codec import CodecKeyError, payload_codec
from starter.client.errors import ConversationError, status_for
from activities.store.api_keys import Role
from starter.runtime.preflight import StartupRefused
from starter.runtime.serving import serving
from starter.client.tenancy import Tenancy

log = logging.getLogger("statekeeper.codec_server")
NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}", re.ASCII)
"""What ``X-Namespace`` may be (a Temporal namespace name); it is the audit entry's subject."""

BODY_LIMIT_BYTES = 16 * 1024 * 1024
"""A request holds at most this much JSON (a page of history's payloads; one payload is <= 2 MB)."""


def cors_origins(settings: Settings) -> list[str]:
    """Origins allowed to call the codec server: ``codec_cors_origins``, else the embedded
    Web UI's (``127.0.0.1`` and ``localhost`` on ``ui_port``)."""
    if settings.codec_cors_origins:
        return [o.strip().rstrip("/") for o in settings.codec_cors_origins.split(",") if o.strip()]
    return [f"http://127.0.0.1:{settings.ui_port}", f"http://localhost:{settings.ui_port}"]


def codec_app(codec: PayloadCodec, origins: Sequence[str], access: Access) -> FastAPI:
    """The codec server's app over ``codec``, its callers authenticated by ``access``: 401
    without a valid key (or, keyless, from a non-loopback address), 403 for a key that is not
    a tenant-wide operator's of the default tenant. A body that is not a JSON ``Payloads`` message gets 422
    ``{"detail"}``; a payload that does not decrypt with the configured keys, 422 too (the
    detail names the key id, never a key); 503 when the audit log cannot be written."""
    app = FastAPI(title="statekeeper codec server", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(CORSMiddleware, allow_origins=list(origins), allow_methods=["POST"],
                       allow_headers=["content-type", "x-namespace", "authorization"], allow_credentials=True)
    install_body_limit(app, BODY_LIMIT_BYTES)

    async def apply(request: Request, encode: bool) -> Response:
        try:
            principal = await access.authenticate(request)
            if principal.role is not Role.OPERATOR or principal.customer is not None:
                raise ConversationError("the codec server needs an operator key", "forbidden")
            # one key encrypts every tenant's payloads, so decoding is a read across tenants: only
            # the deployment's own (default) tenant's operators, never another tenant's, whose
            # keys read nothing outside their tenant (README, "API access")
            if principal.tenant != access.tenancy.default_tenant:
                raise ConversationError("the codec server needs an operator key of the default tenant: it decrypts "
                                        "every tenant's payloads", "forbidden")
        except ConversationError as err:
            headers = {"WWW-Authenticate": "Bearer"} if err.kind == "unauthenticated" else None
            return JSONResponse(status_code=status_for(err), content={"detail": str(err)}, headers=headers)
        try:
            payloads = json_format.Parse(await request.body(), Payloads())
        except (json_format.ParseError, UnicodeDecodeError, RecursionError):
            return JSONResponse(status_code=422, content={"detail": 'the body must be {"payloads": [...]}'})
        namespace = request.headers.get("x-namespace") or "default"
        if NAMESPACE.fullmatch(namespace) is None:  # the audit entry's subject: an id, never the caller's text
            return JSONResponse(status_code=422, content={"detail": "X-Namespace must be a Temporal namespace name: "
                                                          "1-255 ASCII letters, digits and ._-"})
        try:  # the entry comes first: a decrypted answer never leaves unrecorded
            await access.record(principal, "codec.encode" if encode else "codec.decode", f"namespace:{namespace}",
                                f"payloads={len(payloads.payloads)}")
            done = await (codec.encode if encode else codec.decode)(payloads.payloads)
        except CodecKeyError as err:
            return JSONResponse(status_code=422, content={"detail": str(err)})
        except ConversationError as err:
            return JSONResponse(status_code=status_for(err), content={"detail": str(err)})
        return Response(json_format.MessageToJson(Payloads(payloads=done)), media_type="application/json")

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        """200 while the server runs (docker-compose's healthcheck); no key needed, nothing decrypted."""
        return {"status": "ok"}

    @app.post("/encode")
    async def encode(request: Request) -> Response:
        """Encrypt the payloads with the current key."""
        return await apply(request, encode=True)

    @app.post("/decode")
    async def decode(request: Request) -> Response:
        """Decrypt the payloads (payloads not encrypted by us come back unchanged)."""
        return await apply(request, encode=False)

    return app


def local_access(settings: Settings) -> Access:
    """Keyless access for ``statekeeper dev``'s codec server: loopback callers only (its Web
    UI's browser cannot send an API key), every call audited in the journal database."""
    return Access(AuditLog(settings.resolved_journal_url()), Tenancy.from_settings(settings),
                  page_origins=frozenset(cors_origins(settings)))


def served_access(settings: Settings, host: str) -> Access:
    """``statekeeper codec-server``'s access: the API's rule (``access_from_settings``): API
    keys when any exists, keyless on loopback when none does. Raises ``StartupRefused`` on
    any other bind without keys."""
    try:
        return access_from_settings(settings, host)
    except StartupRefused as refused:
        if not str(refused).startswith("refusing to serve"):  # a blank secret, a journal it cannot use
            raise
        raise StartupRefused(
            f"refusing to serve the codec server on {host} without API keys: anyone who can reach it could "
            "decrypt every payload. Create an operator key first (`statekeeper keys create --tenant default "
            "--role operator`), or serve it on 127.0.0.1 (loopback only, keyless)") from None


def codec_or_refuse(settings: Settings) -> PayloadCodec:
    codec = payload_codec(settings)
    if codec is None:
        raise StartupRefused("payload encryption is off (STATEKEEPER_CODEC_ENABLED=false): there is nothing to decode")
    return codec


def served(app: FastAPI, host: str, port: int) -> uvicorn.Server:
    # log_config=None: uvicorn's records go through the root logger and its redaction
    return uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_config=None, log_level="warning"))


@contextlib.asynccontextmanager
async def codec_beside(settings: Settings, host: str = "127.0.0.1", port: Optional[int] = None,
                       access: Optional[Access] = None) -> AsyncIterator[str]:
    """Serve the codec server in this event loop while the block runs (``statekeeper dev``);
    yields its base URL. ``access`` None: ``local_access`` (keyless, loopback callers). Raises
    ``OSError`` if the port is taken, ``StartupRefused`` when encryption is off or has no key."""
    port = settings.codec_port if port is None else port
    access = access or await asyncio.to_thread(local_access, settings)
    server = served(codec_app(codec_or_refuse(settings), cors_origins(settings), access), host, port)
    async with serving(server, "codec server", host, port) as url:
        yield url


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
