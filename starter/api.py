"""HTTP API for backend services, over ``StatekeeperClient``.

Run it with ``uvicorn starter.api:app``. The module-level ``app`` reads ``Settings()``
(env prefix ``STATEKEEPER_``) and connects to Temporal when it starts serving, not at
import. Tests build their own app with ``create_app(client_factory)``.

Routes::

    POST /conversations                   {"conversation_id"?, "store"?}  -> 201 {"conversation_id"}
    POST /conversations/{id}/messages     {"text"}                        -> 200 AssistantReply
    POST /conversations/{id}/cancel       {"reason"?}                     -> 202
    GET  /conversations/{id}                                              -> 200 ConversationState
    GET  /healthz                                                         -> 200 / 503

Refusals carry ``{"detail": "<reason>"}``: 422 for a message the workflow rejects
(empty, over 8 KB), 409 for a conversation that has finished, 404 for an unknown
conversation, 503 when Temporal cannot be reached. The workflow's update validator is
the authority on what a valid message is; the API only translates its reason.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable, Optional, Union

from fastapi import Depends, FastAPI, HTTPException, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from temporalio.service import RPCError

from starter.client import ConversationError, StatekeeperClient
from workflows.contracts import AssistantReply
from workflows.options import MAX_USER_MESSAGE_BYTES
from workflows.state import ConversationState

log = logging.getLogger("statekeeper.api")

ClientFactory = Callable[[], Union[StatekeeperClient, Awaitable[StatekeeperClient]]]
"""Returns (or awaits to) the ``StatekeeperClient`` the app serves with; called once."""

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]*$"
"""Conversation ids and store names: URL-path safe, so ``/conversations/{id}`` round-trips."""

MAX_REQUEST_TEXT_BYTES = 64 * 1024
"""Messages larger than this are refused here, before they become a Temporal payload.
Below it the workflow's own limit (8 KB) decides, so there is one source of truth for
valid messages; this cap only keeps very large bodies off the Temporal server."""

# ConversationError.kind -> HTTP status.
_KIND_STATUS = {
    "invalid_message": 422,  # literal: starlette renamed the constant across versions
    "finished": status.HTTP_409_CONFLICT,
    "not_found": status.HTTP_404_NOT_FOUND,
    "unavailable": status.HTTP_503_SERVICE_UNAVAILABLE,
}


class StartConversation(BaseModel):
    """Body of ``POST /conversations``; both fields optional (a UUID id, store ``main``)."""

    conversation_id: Optional[str] = Field(default=None, min_length=1, max_length=128, pattern=ID_PATTERN)
    store: str = Field(default="main", min_length=1, max_length=64, pattern=ID_PATTERN)


class ConversationCreated(BaseModel):
    """Response of ``POST /conversations``."""

    conversation_id: str


class MessageIn(BaseModel):
    """Body of ``POST /conversations/{id}/messages``. Emptiness and the 8 KB limit are
    checked by the workflow, so its reason reaches the caller verbatim."""

    text: str


class CancelIn(BaseModel):
    """Body of ``POST /conversations/{id}/cancel``; the body itself may be omitted."""

    reason: Optional[str] = Field(default=None, min_length=1, max_length=1000)
    """None: the workflow's default reason (``CancelRequest``)."""


class CancelAccepted(BaseModel):
    """Response of ``POST /conversations/{id}/cancel``: the signal was delivered; the
    conversation stops after any write already running finishes."""

    conversation_id: str
    status: str = "cancelling"


def status_for(err: ConversationError) -> int:
    """HTTP status for a refused request, from ``err.kind`` (503 for an unknown kind:
    the RPC layer failed, not the caller)."""
    return _KIND_STATUS.get(err.kind, status.HTTP_503_SERVICE_UNAVAILABLE)


def _refused(err: ConversationError) -> HTTPException:
    return HTTPException(status_code=status_for(err), detail=str(err))


def create_app(client_factory: Optional[ClientFactory] = None) -> FastAPI:
    """Build the API.

    ``client_factory`` is called once, at startup (lifespan) or, when the ASGI server
    does not run lifespan events (``httpx.ASGITransport``), on the first request that
    needs it. ``None`` means: read ``Settings()`` and connect with ``starter.connection.connect``.
    """
    lock = asyncio.Lock()
    holder: dict[str, Any] = {"client": None}

    async def _default_factory() -> StatekeeperClient:
        # Imported here so that importing starter.api (e.g. for tests with an injected
        # client) does not pull in the worker's activity dependencies.
        from settings import Settings
        from starter.connection import connect

        settings = Settings()
        return StatekeeperClient(await connect(settings), settings.task_queue, settings.write_timeout_seconds)

    factory: ClientFactory = client_factory or _default_factory

    async def ensure_client() -> StatekeeperClient:
        if holder["client"] is None:
            async with lock:
                if holder["client"] is None:
                    made = factory()
                    holder["client"] = await made if inspect.isawaitable(made) else made
        return holder["client"]

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            await ensure_client()
        except Exception as err:  # noqa: BLE001
            # Keep serving: under docker-compose Temporal may still be starting. Requests
            # retry the connection and /healthz answers 503 until it succeeds.
            log.warning("Temporal not reachable at startup (%s); will retry on demand", err)
        yield

    app = FastAPI(title="statekeeper", version="0.1.0", lifespan=lifespan,
                  description="Durable LLM-driven support conversations on Temporal.")

    async def client_dep() -> StatekeeperClient:
        try:
            return await ensure_client()
        except Exception as err:  # noqa: BLE001
            raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE,
                                detail=f"Temporal is not reachable: {err}") from err

    @app.exception_handler(RequestValidationError)
    async def _invalid_body(_: Request, err: RequestValidationError) -> JSONResponse:
        # one shape for every refusal: {"detail": "<reason>"}
        reasons = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}" for e in err.errors())
        return JSONResponse(status_code=422, content={"detail": f"invalid request: {reasons}"})

    @app.exception_handler(RPCError)
    async def _rpc_unavailable(_: Request, err: RPCError) -> JSONResponse:
        # RPC failures the client does not translate (e.g. starting a workflow while the
        # server is down) are infrastructure trouble, not a bad request.
        return JSONResponse(status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
                            content={"detail": f"Temporal request failed: {err}"})

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        """200 once a Temporal client is connected, else 503 with the reason."""
        try:
            await ensure_client()
        except Exception as err:  # noqa: BLE001
            return JSONResponse(status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
                                content={"status": "unavailable", "detail": f"Temporal is not reachable: {err}"})
        return JSONResponse({"status": "ok"})

    @app.post("/conversations", status_code=status.HTTP_201_CREATED, response_model=ConversationCreated)
    async def start_conversation(body: Optional[StartConversation] = None,
                                 client: StatekeeperClient = Depends(client_dep)) -> ConversationCreated:
        """Start a conversation (idempotent for an id that is already running)."""
        body = body or StartConversation()
        try:
            conversation_id = await client.start_conversation(body.conversation_id, store=body.store)
        except ConversationError as err:
            raise _refused(err) from err
        return ConversationCreated(conversation_id=conversation_id)

    @app.post("/conversations/{conversation_id}/messages", response_model=AssistantReply)
    async def send_message(conversation_id: str, body: MessageIn,
                           client: StatekeeperClient = Depends(client_dep)) -> AssistantReply:
        """Send one user message; waits for and returns the assistant's reply."""
        size = len(body.text.encode("utf-8", errors="surrogatepass"))
        if size > MAX_REQUEST_TEXT_BYTES:
            raise HTTPException(_KIND_STATUS["invalid_message"],
                                detail=f"message is {size} bytes; the limit is {MAX_USER_MESSAGE_BYTES} bytes")
        try:
            return await client.send_message(conversation_id, body.text)
        except ConversationError as err:
            raise _refused(err) from err

    @app.post("/conversations/{conversation_id}/cancel", status_code=status.HTTP_202_ACCEPTED,
              response_model=CancelAccepted)
    async def cancel(conversation_id: str, body: Optional[CancelIn] = None,
                     client: StatekeeperClient = Depends(client_dep)) -> CancelAccepted:
        """Ask the conversation to stop; accepted, not yet done (a running write finishes first)."""
        body = body or CancelIn()
        try:
            await client.cancel(conversation_id, body.reason)
        except ConversationError as err:
            raise _refused(err) from err
        return CancelAccepted(conversation_id=conversation_id)

    @app.get("/conversations/{conversation_id}", response_model=ConversationState)
    async def get_state(conversation_id: str, client: StatekeeperClient = Depends(client_dep)) -> ConversationState:
        """The conversation's typed state (also after it finished, while history is retained)."""
        try:
            return await client.state(conversation_id)
        except ConversationError as err:
            raise _refused(err) from err

    return app


app = create_app()
"""The served app: ``uvicorn starter.api:app``; settings are read at startup."""
