"""HTTP API for backend services, over ``StatekeeperClient``.

Run it with ``uvicorn starter.api:app`` (or ``statekeeper api``). The module-level ``app``
reads ``Settings()`` (env prefix ``STATEKEEPER_``) and connects to Temporal when it starts
serving, not at import. Tests build their own app with ``create_app(client_factory)``.

Routes (bodies: ``starter.api.models``; refunds and approvals: ``starter.api.processes``)::

    POST /conversations                {conversation_id?, store?, text?, message_id?} -> 201 {conversation_id, reply?}
    POST /conversations/{id}/messages  {text, message_id?}                            -> 200 AssistantReply
    POST /conversations/{id}/cancel    {reason?}                                      -> 202
    GET  /conversations/{id}                                                          -> 200 ConversationState
    GET  /conversations?customer_id=&order_id=&status=&step=&limit=&next_page_token=  -> 200 {items, next_page_token}
    GET  /conversations/{id}/transcript[?format=text]                                 -> 200 Transcript / text; 404
    GET  /conversations/{id}/events  (server-sent events, Last-Event-ID; ``starter.api.journal``) -> 200 stream; 404
    POST /refunds  GET /refunds/{refund_id}  GET /refunds?order_id=  GET/POST /approvals/{id}  GET /approvals?status=pending
    GET  /usage  (``starter.api.limits``: the caller's tenant's use and limits)        -> 200 TenantUsage
    POST /webhooks  GET /webhooks  DELETE /webhooks/{id}  GET /webhooks/{id}/deliveries
    POST /webhooks/{id}/deliveries/{delivery_id}/retry  (operators; ``starter.api.webhooks.routes``)
    GET  /ui/approvals  (``starter.api.inbox``: the supervisors' inbox in the browser; not in the OpenAPI document)
    GET  /healthz                                                                     -> 200 / 503

Every route but ``/healthz`` and the OpenAPI pages needs an API key when keys are configured
(``starter.api.auth``: 401 without a valid one, 403 when its role may not, 404 for another
tenant's process, as if it did not exist; 429 past the key's request rate or the tenant's
open conversations, ``starter.api.limits``); reads of personal data are audited (``activities.store.audit``).

Every refusal is ``{"detail": "<reason>"}``, never exception names or gRPC text, with a
``Refusal-Kind`` header naming its kind (``starter.api.refusal_kind``); each route's
statuses are declared in one place, ``starter.api.responses``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable, Optional, Union

from fastapi import Depends, FastAPI, Query, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from temporalio.service import RPCError

from starter.api.models import (MAX_BODY_BYTES, CancelAccepted, CancelIn, ConversationCreated, ConversationId,
                                 ConversationStatusFilter, MessageIn, StartConversation, check_message, client_dep,
                                 filter_query, page_token_query)
from starter.api.guard import Authenticate, Guard, document_security, documented_app, guard_dep, refusal_headers
from starter.api.inbox.pages import WebUiLinks
from starter.api.inbox.pages import close as close_inbox
from starter.api.inbox.pages import install as install_inbox
from starter.api.journal import printable, router as journal_router
from starter.api.limits import router as limits_router
from starter.api.memory.routes import router as memory_router
from starter.api.auth import Access, AccessSource, Permission
from starter.api.processes import router as processes_router
from starter.api.webhooks.routes import router as webhooks_router
from starter import package_version
from starter.api.refusal_kind import RefusalKind, with_kind
from starter.api.responses import responses_for
from starter.api.startup import OneLineStartupRefusal
from starter.api.body_guard import install_body_checks, validation_reasons
from starter.client.conversations import FIRST_MESSAGE_ID, ConversationError, StatekeeperClient
from starter.client.errors import status_for
from starter.client.listing import MAX_PAGE, Page
from workflows.domain.contracts import AssistantReply
from workflows.domain.state import ConversationState

__all__ = ["app", "create_app", "status_for"]

log = logging.getLogger("statekeeper.api")

ClientFactory = Callable[[], Union[StatekeeperClient, Awaitable[StatekeeperClient]]]
"""Returns (or awaits to) the ``StatekeeperClient`` the app serves with; called until it succeeds."""
CONNECT_SECONDS = 5.0
"""Deadline of connecting to Temporal; past it the request is a 503."""


def create_app(client_factory: Optional[ClientFactory] = None,
               journal_factory: Optional[Callable[[], Any]] = None,
               access: Union[Access, AccessSource, None] = None,
               web_ui: Optional[WebUiLinks] = None) -> FastAPI:
    """Build the API.

    ``client_factory`` is called at startup (lifespan) or, when the ASGI server does not run
    lifespan events (``httpx.ASGITransport``) or the first attempt failed, on the next request
    that needs it. ``None`` means: read ``Settings()`` and connect with ``starter.runtime.connection``.
    ``journal_factory`` returns the ``JournalStore`` of the transcript route (on first use;
    ``None``: the one ``Settings()`` names). ``access`` (``starter.api.auth``), or a function
    building it when the app first serves: ``None`` is the keyless loopback API, auditing
    into the journal's database (``statekeeper api``/``dev`` pass ``access_from_settings``).
    ``web_ui``: where the supervisors' inbox links each approval's run (``starter.api.inbox``;
    None: ``Settings()``'s Web UI, read on first use).
    """
    lock = asyncio.Lock()
    holder: dict[str, Any] = {"client": None, "journal": None, "access": access if isinstance(access, Access) else None}

    async def _default_factory() -> StatekeeperClient:
        # imported here so that importing starter.api.application does not read settings or connect
        from settings import Settings
        from starter.dev import state as devstate
        from starter.ops.bootstrap import client_for
        from starter.runtime.connection import connect

        settings = devstate.adopt(Settings())  # the detached dev's data (and pseudonym key), if any
        return client_for(await connect(settings), settings)

    factory: ClientFactory = client_factory or _default_factory

    async def ensure_client() -> StatekeeperClient:
        if holder["client"] is None:
            async with lock:
                if holder["client"] is None:
                    made = factory()
                    holder["client"] = await asyncio.wait_for(made, CONNECT_SECONDS) if inspect.isawaitable(
                        made) else made
        return holder["client"]

    def _default_journal() -> Any:
        from activities.store.journal import JournalStore
        from settings import Settings
        from starter.dev import state as devstate

        return JournalStore(devstate.adopt(Settings()).resolved_journal_url())

    async def ensure_journal() -> Any:
        if holder["journal"] is None:
            async with lock:
                if holder["journal"] is None:
                    holder["journal"] = await asyncio.to_thread(journal_factory or _default_journal)
        return holder["journal"]

    def _keyless() -> Access:
        from settings import Settings
        from activities.store.audit import AuditLog
        from starter.client.tenancy import Tenancy

        url = holder["journal"].engine.url.render_as_string(hide_password=False)
        return Access(AuditLog(url), Tenancy.from_settings(Settings()))

    async def ensure_access() -> Access:
        if holder["access"] is None:
            if access is None:
                await ensure_journal()
            async with lock:
                if holder["access"] is None:
                    holder["access"] = await asyncio.to_thread(access or _keyless)
        return holder["access"]

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await ensure_access()  # StartupRefused (no keys where keys are needed) stops the server here
        try:
            await ensure_client()
        except Exception as err:  # noqa: BLE001
            # Keep serving: under docker-compose Temporal may still be starting. Requests
            # retry the connection and /healthz answers 503 until it succeeds.
            log.warning("Temporal not reachable at startup (%s); will retry on demand", type(err).__name__)
        yield
        await close_inbox(app)  # its feeds stop asking Temporal

    # redirect_slashes off: "/conversations/" is a 404 like any unknown path, not an undocumented 307
    app = documented_app(title="statekeeper", version=package_version(), lifespan=lifespan, redirect_slashes=False,
                         description="Durable LLM-driven support conversations and refunds on Temporal.")
    app.state.ensure_client, app.state.ensure_journal, app.state.ensure_access = ensure_client, ensure_journal, ensure_access
    app.add_middleware(OneLineStartupRefusal)  # uvicorn starter.api:app: a refusal in one line
    app.include_router(processes_router)
    app.include_router(journal_router)
    app.include_router(limits_router)  # GET /usage
    app.include_router(memory_router)  # /customers/{customer_id}/memory
    app.include_router(webhooks_router)  # /webhooks (starter.api.webhooks.routes)
    install_inbox(app, web_ui, ensure_client, ensure_access)  # GET /ui/approvals: the supervisors' inbox

    install_body_checks(app, MAX_BODY_BYTES)  # 413 over the limit; 422 not UTF-8 JSON or nested too deep
    app.add_middleware(Authenticate, ensure_access=ensure_access)  # 401 before anything else
    app.add_middleware(RefusalKind)  # outermost: every refusal, a middleware's too, names its kind
    document_security(app)

    @app.exception_handler(RequestValidationError)
    async def _invalid_body(_: Request, err: RequestValidationError) -> JSONResponse:
        # one shape for every refusal: {"detail": "<reason>"}
        return JSONResponse(status_code=422, content={"detail": validation_reasons(list(err.errors()))})

    @app.exception_handler(StarletteHTTPException)
    async def _http_refusal(_: Request, err: StarletteHTTPException) -> JSONResponse:
        # FastAPI answers a body it could not parse (other than bad JSON) with a 400; every
        # malformed request is a 422 here, in the one shape (README, starter.api.responses)
        if err.status_code == 400:
            return JSONResponse(status_code=422, content={"detail": "invalid request: the body could not be parsed"})
        return JSONResponse(status_code=err.status_code, content={"detail": str(err.detail)},
                            headers=getattr(err, "headers", None))

    @app.exception_handler(ConversationError)
    async def _refused(_: Request, err: ConversationError) -> JSONResponse:
        headers = refusal_headers(err)
        # a reason may quote the caller's id: its invisible and control characters are shown escaped
        return JSONResponse(status_code=status_for(err), content={"detail": printable(str(err))},
                            headers=with_kind(err, headers))

    @app.exception_handler(RPCError)
    async def _rpc_unavailable(_: Request, err: RPCError) -> JSONResponse:
        # RPC failures the client did not translate are infrastructure trouble; the gRPC
        # text stays in the log, not in the answer
        log.warning("untranslated Temporal RPC failure: %s", err.status)
        return JSONResponse(status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
                            content={"detail": "Temporal request failed; retry later"})

    @app.get("/healthz", responses=responses_for("GET", "/healthz"))
    async def healthz() -> JSONResponse:
        """200 when Temporal answers and at least one worker polls the task queue; else 503
        naming which is missing. ``stuck``: how many runs of the task queue Temporal reports
        stuck (their workflow tasks keep failing; ``starter.client.run_status``), null when the
        count could not be read; stuck runs do not make the API unhealthy."""
        try:
            client = await ensure_client()
            polling = await client.worker_polling()
        except Exception:  # noqa: BLE001 (connection or RPC failure: the same answer)
            return JSONResponse(status_code=503, content={"status": "unavailable", "temporal": "unreachable",
                                                          "detail": "Temporal is not reachable"})
        if not polling:
            return JSONResponse(status_code=503, content={
                "status": "unavailable", "temporal": "reachable", "workers": 0,
                "detail": f"no worker is polling task queue {client.task_queue}"})
        try:
            stuck: Optional[int] = await client.count_stuck()
        except Exception:  # noqa: BLE001 (visibility did not answer: the API still serves)
            stuck = None
        return JSONResponse({"status": "ok", "temporal": "reachable", "task_queue": client.task_queue, "stuck": stuck})

    @app.post("/conversations", status_code=status.HTTP_201_CREATED, response_model=ConversationCreated,
              responses=responses_for("POST", "/conversations"))
    async def start_conversation(body: Optional[StartConversation] = None,
                                 guard: Guard = Depends(guard_dep),
                                 client: StatekeeperClient = Depends(client_dep)) -> ConversationCreated:
        """Start a conversation, idempotent on the caller's id (one run however often it is
        sent); with ``text``, also send the first message and answer its reply (the same
        reply on a repeat). An unknown store (or another tenant's) is a 422 and leaves
        nothing running; another tenant's conversation id is a 409."""
        body = body or StartConversation()
        guard.require(Permission.START_CONVERSATION)
        attributes = guard.start_attributes(body.store)
        if body.text is not None:
            check_message(body.text)
        if body.conversation_id is not None:
            await guard.claim(client, body.conversation_id)  # nothing reaches another tenant's run
        limits = guard.access.limits
        wanted, placed = (body.conversation_id, False) if limits is None else await limits.open_conversation(
            guard, client, body.conversation_id)  # 429 at the tenant's open-conversation limit
        try:
            conversation_id = await client.start_conversation(wanted, store=body.store, search_attributes=attributes)
        except ConversationError as err:
            if placed and err.kind not in ("timeout", "outcome_unknown", "unavailable"):
                await limits.release(wanted)  # nothing runs for it (an unknown fate keeps its place)
            # a repeat after the first message ended the conversation still gets its reply
            if body.text is None or err.kind != "finished" or body.conversation_id is None:
                raise
            conversation_id = body.conversation_id
        await guard.claim(client, conversation_id)  # the id may have been taken meanwhile
        if body.text is None:
            return ConversationCreated(conversation_id=conversation_id)
        reply = await client.send_message(conversation_id, body.text, body.message_id or FIRST_MESSAGE_ID)
        reply = await guard.scoped_reply(client, conversation_id, reply)  # another customer's data: a 404
        return ConversationCreated(conversation_id=conversation_id, reply=reply)

    @app.get("/conversations", response_model=Page, response_model_exclude_none=False,
             responses=responses_for("GET", "/conversations"))
    async def list_conversations(customer_id: Optional[str] = filter_query(), order_id: Optional[str] = filter_query(),
                                 status: ConversationStatusFilter = None, step: Optional[str] = filter_query(),
                                 limit: int = Query(20, ge=1, le=MAX_PAGE),
                                 next_page_token: Optional[str] = page_token_query(),
                                 guard: Guard = Depends(guard_dep),
                                 client: StatekeeperClient = Depends(client_dep)) -> Page:
        """The caller's tenant's conversations matching every filter (search attributes),
        newest first, one page (a customer-scoped key: only its customer's)."""
        guard.require(Permission.LIST_CONVERSATIONS)
        page = await client.list_conversations(customer_id=customer_id, order_id=order_id, status=status, step=step,
                                               limit=limit, next_page_token=next_page_token, scope=guard.scope())
        await guard.audit_list(client, "conversations", customer_id, len(page.items))
        return page

    @app.post("/conversations/{conversation_id}/messages", response_model=AssistantReply,
              responses=responses_for("POST", "/conversations/{conversation_id}/messages"))
    async def send_message(conversation_id: ConversationId, body: MessageIn, guard: Guard = Depends(guard_dep),
                           client: StatekeeperClient = Depends(client_dep)) -> AssistantReply:
        """Send one user message; waits (bounded) for and returns the assistant's reply."""
        check_message(body.text)
        await guard.conversation(client, conversation_id, Permission.SEND_MESSAGE)
        reply = await client.send_message(conversation_id, body.text, body.message_id)
        return await guard.scoped_reply(client, conversation_id, reply)

    @app.post("/conversations/{conversation_id}/cancel", status_code=status.HTTP_202_ACCEPTED,
              response_model=CancelAccepted,
              responses=responses_for("POST", "/conversations/{conversation_id}/cancel"))
    async def cancel(conversation_id: ConversationId, body: Optional[CancelIn] = None,
                     guard: Guard = Depends(guard_dep), client: StatekeeperClient = Depends(client_dep)) -> CancelAccepted:
        """Ask the conversation to stop (operators); accepted, not yet done (a running write finishes first)."""
        body = body or CancelIn()
        await guard.conversation(client, conversation_id, Permission.CANCEL_CONVERSATION)
        await guard.audit("cancel_conversation", conversation_id, f"rollback={body.rollback}")  # first: 503 unsent
        await client.cancel(conversation_id, body.reason, rollback=body.rollback)
        return CancelAccepted(conversation_id=conversation_id)

    @app.get("/conversations/{conversation_id}", response_model=ConversationState,
             responses=responses_for("GET", "/conversations/{conversation_id}"))
    async def get_state(conversation_id: ConversationId, guard: Guard = Depends(guard_dep),
                        client: StatekeeperClient = Depends(client_dep)) -> ConversationState:
        """The conversation's typed state (also after it finished, while history is retained); audited."""
        await guard.conversation(client, conversation_id, Permission.READ_CONVERSATION)
        await guard.audit("read_state", conversation_id)
        return await client.state(conversation_id)

    return app


def _served_access() -> Access:
    from settings import Settings
    from starter.api import auth

    # the bind address is not known here: keys are always required
    from starter.dev import state as devstate
    return auth.access_from_settings(devstate.adopt(Settings()), host=None)


app = create_app(access=_served_access)
"""The served app: ``uvicorn starter.api:app``; settings are read at startup, and it refuses
to start without API keys (``statekeeper api`` serves keyless on loopback)."""
