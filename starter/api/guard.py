"""What every API route asks before it acts: may this caller do this (``starter.api.auth``
role matrix, 403), and may it see this process (``starter.client.tenancy``, 404 as if it did not
exist); and the audit entries of reads of personal data (``activities.store.audit``).

Routes take ``guard: Guard = Depends(guard_dep)`` and call its methods before touching a
process; a refusal raises ``ConversationError`` (one ``{"detail"}`` shape for every answer).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, Optional

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi_offline import FastAPIOffline
from temporalio.common import SearchAttributePair

from starter.client.approvals import _shown, approval_workflow_id
from starter.api.auth import LOCAL_ACTOR, Access, Permission, Principal
from starter.api.inbox import sessions as inbox_paths
from starter.client.conversations import StatekeeperClient
from starter.client.errors import ConversationError, status_for
from starter.client.tenancy import owner_of, start_attributes, visible
from workflows.domain.replies import unknown_store_reason
from workflows.domain.pseudonym import customer_pseudonym
from workflows.conversation.workflow import support_workflow_id

log = logging.getLogger("statekeeper.api")


def conversation_missing(conversation_id: str) -> ConversationError:
    """The 404 of a conversation that does not exist, word for word the client's own."""
    return ConversationError(f"conversation {conversation_id} does not exist", "not_found")


class Guard:
    """``Guard(principal, access)``: the authenticated caller of one request and the app's access."""

    def __init__(self, principal: Principal, access: Access,
                 ensure_journal: Optional[Callable[[], Awaitable[Any]]] = None) -> None:
        self.principal, self.access = principal, access
        self._ensure_journal = ensure_journal
        """The app's journal (``starter.api.application``), asked whether a conversation id was used before."""

    @property
    def tenancy(self):  # noqa: ANN201 (a starter.client.tenancy.Tenancy)
        """The app's tenancy settings."""
        return self.access.tenancy

    def require(self, permission: Permission) -> None:
        """403 unless the role matrix allows ``permission``."""
        self.principal.require(permission)

    async def conversation(self, client: StatekeeperClient, conversation_id: str, permission: Permission) -> None:
        """Require ``permission``, then hide another tenant's (or, for a customer-scoped key,
        another customer's) conversation as a 404. A conversation without a run is a 404 to
        every key: even where our own store still holds its transcript, a run no longer
        retained has no known tenant. Only the keyless local operator passes on (the call's
        own answer follows)."""
        self.require(permission)
        p, missing = self.principal, conversation_missing(conversation_id)
        owner = await visible(client, self.tenancy, support_workflow_id(conversation_id), p.tenant, p.customer, missing)
        if owner is None and p.actor != LOCAL_ACTOR:
            raise missing

    async def scoped_reply(self, client: StatekeeperClient, conversation_id: str, reply: Any) -> Any:
        """``reply``, if the caller may still see the conversation after the message. A
        customer-scoped key's conversation that authenticated another customer (its
        ``CustomerId`` now names them) is cancelled and the reply withheld as a 404, as for any
        other customer's conversation: the reply may hold that customer's orders."""
        p = self.principal
        if p.customer is None:
            return reply
        missing = conversation_missing(conversation_id)
        try:
            await visible(client, self.tenancy, support_workflow_id(conversation_id), p.tenant, p.customer, missing)
        except ConversationError:
            try:
                await client.cancel(conversation_id, reason="its customer-scoped key may not serve another customer")
            except ConversationError:
                pass  # already ended: nothing more runs for it either way
            await self.audit("withheld_reply", conversation_id, "another customer authenticated")
            raise
        return reply

    async def claim(self, client: StatekeeperClient, conversation_id: str) -> None:
        """A conversation id being started must be free or the caller's own: another
        tenant's (or customer's) is a 409, and nothing is sent to it. So is an id without a
        run that the journal remembers (Temporal's retention dropped its runs): conversation
        ids are never reused, and a new run under it would serve the old transcript (another
        tenant's or customer's) as its own, and its writes' keys would meet the old ones."""
        p = self.principal
        try:
            owner = await visible(client, self.tenancy, support_workflow_id(conversation_id), p.tenant, p.customer,
                                  conversation_missing(conversation_id))
        except ConversationError as err:
            if err.kind != "not_found":  # Temporal unreachable: that answer, not a conflict
                raise
            raise ConversationError(f"conversation id {conversation_id} is taken; choose a new conversation id",
                                    "conflict") from err
        if owner is None and await self._used_before(conversation_id):
            raise ConversationError(f"conversation id {conversation_id} was used before; choose a new "
                                    "conversation id", "conflict")

    async def _used_before(self, conversation_id: str) -> bool:
        """Whether the journal holds records of ``conversation_id``; 503 when it cannot say
        (an id must not be reused on a guess)."""
        if self._ensure_journal is None:
            return False
        try:
            journal = await self._ensure_journal()
            return await asyncio.to_thread(journal.knows, conversation_id)
        except Exception as err:  # noqa: BLE001 (the database's text stays out of the answer)
            log.warning("journal not reachable to check a conversation id (%s)", type(err).__name__)
            raise ConversationError("the journal is not reachable; retry later", "unavailable") from err

    def start_attributes(self, store: str) -> list[SearchAttributePair]:
        """The search attributes of a process the caller starts on ``store``. A store of
        another tenant is refused as the unknown store it is to this caller (422)."""
        if self.tenancy.tenant_of_store(store) != self.principal.tenant:
            raise ConversationError(unknown_store_reason(store), "invalid")
        return start_attributes(self.principal.tenant, self.principal.customer)

    async def refund(self, client: StatekeeperClient, refund_id: str, *, retained: bool = False) -> None:
        """Require refund reads, and hide another tenant's refund as a 404. With ``retained``, a
        refund without a run is a 404 to every key but the keyless local operator (as a
        conversation's: its tenant is on the run)."""
        self.require(Permission.READ_REFUNDS)
        p = self.principal
        missing = ConversationError(f"refund {refund_id} does not exist", "not_found")
        owner = await visible(client, self.tenancy, refund_id, p.tenant, None, missing)
        if retained and owner is None and p.actor != LOCAL_ACTOR:
            raise missing

    async def approval(self, client: StatekeeperClient, approval_id: str,
                       permission: Permission = Permission.DECIDE_APPROVAL) -> None:
        """Require ``permission`` (deciding approvals, or reading them); an approval of another
        tenant's process is a 404."""
        self.require(permission)
        workflow_id = approval_workflow_id(approval_id)
        owner = await owner_of(client, self.tenancy, workflow_id)
        if owner is not None and owner.tenant != self.principal.tenant:
            raise ConversationError(f"approval {_shown(approval_id)} does not exist", "not_found")

    def scope(self) -> list[str]:
        """Visibility-query clauses of the caller's lists: its tenant (and customer)."""
        return self.tenancy.list_clauses(self.principal.tenant, self.principal.customer)

    async def audit(self, action: str, subject: str, detail: str = "") -> None:
        """Record that the caller read personal data of ``subject`` (an opaque id); 503 if
        the entry cannot be written, and then nothing is served."""
        await self.access.record(self.principal, action, subject, detail)

    async def audit_list(self, client: StatekeeperClient, what: str, customer_id: Optional[str], count: int) -> None:
        """Audit a list by customer: the filter's customer, or the scoped key's own. The
        subject is the customer's pseudonym, never the real id."""
        if customer_id is not None and client._pseudonym_key:  # noqa: SLF001 (the key the list itself used)
            subject = customer_pseudonym(customer_id, client._pseudonym_key)  # noqa: SLF001
        elif self.principal.customer is not None:
            subject = self.principal.customer
        else:
            return
        await self.audit(f"list_{what}_by_customer", subject, f"items={count}")


OPEN_PATHS = frozenset({"/healthz", "/docs", "/docs/oauth2-redirect", "/openapi.json"})
"""Paths served without a key: the health check and the API's own documentation."""
DOCS_STATIC = "/docs/static"
"""Where the documentation pages' scripts, styles and icon are served (no key: ``is_open``)."""


def documented_app(**kwargs: Any) -> FastAPI:
    """``FastAPI(**kwargs)`` whose Swagger UI (``/docs``) loads its script, style and icon from
    this server (the fastapi-offline package, at ``DOCS_STATIC``), not from a CDN: the page works
    without internet, and the browser asks no third party. No ReDoc page: it fetches its logo
    from the vendor's CDN."""
    return FastAPIOffline(static_url=DOCS_STATIC, redoc_url=None, **kwargs)


def is_open(path: str) -> bool:
    """True for a path served without a key: ``OPEN_PATHS``, the files under ``DOCS_STATIC``, and
    the supervisors' inbox's sign-in, sign-out and static files (``starter.api.inbox``)."""
    return (path in OPEN_PATHS or path.startswith(DOCS_STATIC + "/") or path in inbox_paths.OPEN_UI_PATHS
            or path.startswith(inbox_paths.STATIC + "/"))


class Authenticate:
    """ASGI middleware: ``Authenticate(app, ensure_access)``. Every HTTP request outside
    ``OPEN_PATHS`` is authenticated before routing, body parsing or any Temporal call, so
    every route (also one added later) needs a key; a refusal is 401 ``{"detail"}`` with
    ``WWW-Authenticate: Bearer`` (the inbox page without a session: a redirect to its sign-in). A key past its request rate is a 429 with ``Retry-After``
    (``starter.api.limits``). The caller goes to ``guard_dep`` in the request's state."""

    def __init__(self, app: Any, ensure_access: Callable[[], Awaitable[Access]]) -> None:
        self.app, self.ensure_access = app, ensure_access

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or is_open(scope["path"]):
            await self.app(scope, receive, send)
            return
        try:
            access = await self.ensure_access()
            principal = await access.authenticate(Request(scope))
            if access.limits is not None:
                await access.limits.admit(principal)  # 429 past the key's rate (starter.api.limits)
        except ConversationError as err:
            if err.kind == "unauthenticated" and scope["path"] == inbox_paths.INBOX and scope["method"] == "GET":
                # a person opening the inbox without a session (or with an expired one) signs in first
                await RedirectResponse(inbox_paths.SIGN_IN, status_code=303)(scope, receive, send)
                return
            headers = refusal_headers(err)
            await JSONResponse(status_code=status_for(err), content={"detail": str(err)}, headers=headers)(
                scope, receive, send)
            return
        except Exception as err:  # noqa: BLE001 (no keys where needed, key store unreachable: never served)
            log.warning("authentication unavailable (%s)", type(err).__name__)
            await JSONResponse(status_code=503, content={"detail": "authentication is not available; retry later"})(
                scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)


def refusal_headers(err: ConversationError) -> Optional[dict[str, str]]:
    """The headers of a refusal's answer: ``WWW-Authenticate`` for a 401, ``Retry-After``
    (seconds) for a 429 that knows when to retry."""
    if err.kind == "unauthenticated":
        return {"WWW-Authenticate": "Bearer"}
    retry_after = getattr(err, "retry_after", None)
    return {"Retry-After": str(retry_after)} if retry_after is not None else None


async def guard_dep(request: Request) -> Guard:
    """FastAPI dependency: the request's ``Guard``, from the caller ``Authenticate`` found."""
    access: Access = await request.app.state.ensure_access()
    principal = getattr(request.state, "principal", None)
    return Guard(principal or await access.authenticate(request), access,
                 getattr(request.app.state, "ensure_journal", None))


def document_security(app: FastAPI) -> None:
    """Add the API-key schemes and the 401/403 answers to ``app``'s OpenAPI document."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = build()
        schema.setdefault("components", {}).setdefault("securitySchemes", {}).update({
            "bearer": {"type": "http", "scheme": "bearer", "description": "Authorization: Bearer <API key>"},
            "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"}})
        refusal = {"application/json": {"schema": {"type": "object", "properties": {"detail": {"type": "string"}},
                                                   "required": ["detail"]}}}
        for path, operations in schema.get("paths", {}).items():
            if path in OPEN_PATHS:
                continue
            for operation in operations.values():
                operation["security"] = [{"bearer": []}, {"apiKey": []}]
                responses = operation.setdefault("responses", {})
                responses.setdefault("401", {"description": "No API key, or not a valid one", "content": refusal})
                responses.setdefault("403", {"description": "The key's role or customer scope does not allow this",
                                             "content": refusal})
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
