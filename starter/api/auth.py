"""Who is calling the HTTP API and what they may do.

``Access`` is the app's authentication: with keys (``activities.store.api_keys``) every request but
``/healthz`` and the OpenAPI pages must carry one (``Authorization: Bearer <key>`` or
``X-API-Key: <key>``; on the supervisors' inbox's routes, a browser's signed session made by
signing in with an operator key: ``starter.api.inbox.sessions``), else 401; keyless
(``statekeeper dev`` / ``statekeeper api`` on loopback while no key exists) every request from a
loopback address is the local operator of the default tenant, and any other is a 401.

The role matrix (``MATRIX``; README, "API access") says which kind of caller may do what:
``customer`` (a service key scoped to one customer), ``service``, ``operator``. Tenancy
(``starter.client.tenancy``) then hides every other tenant's processes.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from enum import Enum
from typing import Any, Callable, Optional
from urllib.parse import urlsplit

from fastapi import Request
from pydantic import BaseModel

from activities.store.audit import AuditLog
from starter.api.inbox.sessions import sessions_for
from starter.client.errors import ConversationError
from activities.store.api_keys import KeyStore, Role
from starter.client.tenancy import Tenancy

log = logging.getLogger("statekeeper.auth")

LOCAL_ACTOR = "local"
"""The actor of the keyless loopback API in audit entries."""


class Permission(str, Enum):
    """Actions of the API that the role matrix governs."""

    START_CONVERSATION = "start a conversation"
    SEND_MESSAGE = "send a message"
    READ_CONVERSATION = "read a conversation's state or transcript"
    LIST_CONVERSATIONS = "list conversations"
    CANCEL_CONVERSATION = "cancel a conversation"
    REQUEST_REFUND = "request a refund"
    READ_REFUNDS = "read or list refunds"
    LIST_APPROVALS = "list and read approvals"
    DECIDE_APPROVAL = "approve or reject"
    RESOLVE_OUTCOME = "resolve an unknown outcome"
    CUSTOMER_MEMORY = "read or correct what is remembered about a customer"
    MANAGE_WEBHOOKS = "manage webhooks"


_CONVERSING = {Permission.START_CONVERSATION, Permission.SEND_MESSAGE, Permission.READ_CONVERSATION,
               Permission.LIST_CONVERSATIONS, Permission.CUSTOMER_MEMORY}
_SERVICE = _CONVERSING | {Permission.REQUEST_REFUND, Permission.READ_REFUNDS}
MATRIX: dict[str, frozenset[Permission]] = {
    "customer": frozenset(_CONVERSING),
    "service": frozenset(_SERVICE),
    "operator": frozenset(_SERVICE | {Permission.CANCEL_CONVERSATION, Permission.LIST_APPROVALS,
                                      Permission.DECIDE_APPROVAL, Permission.RESOLVE_OUTCOME,
                                      Permission.MANAGE_WEBHOOKS}),
}
"""Caller kind → what it may do, always within its own tenant. ``customer``: a service key
scoped to one customer, and only that customer's conversations."""


class Principal(BaseModel):
    """An authenticated caller: ``actor`` names it in the audit log (``key:<key id>`` or
    ``local``); ``customer`` is the pseudonym a scoped key is bound to."""

    actor: str
    tenant: str
    role: Role
    customer: Optional[str] = None
    requests_per_minute: Optional[int] = None
    """The key's own request rate limit (None: the API's default; ``starter.api.limits``)."""

    @property
    def kind(self) -> str:
        """``customer``, ``service`` or ``operator``: the row of ``MATRIX`` that applies."""
        return "customer" if self.customer is not None else self.role.value

    def may(self, permission: Permission) -> bool:
        """True if ``MATRIX`` allows this caller ``permission``."""
        return permission in MATRIX[self.kind]

    def require(self, permission: Permission) -> None:
        """Raise ``ConversationError`` ``forbidden`` (403) unless the caller may ``permission``."""
        if not self.may(permission):
            needs = "an operator key" if permission in MATRIX["operator"] - MATRIX["service"] else "a tenant-wide key"
            raise ConversationError(f"this key may not {permission.value}: that needs {needs}", "forbidden")


def is_loopback(host: Optional[str]) -> bool:
    """True for a loopback address or ``localhost`` (the only binds allowed without keys)."""
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(host_header: str) -> str:
    """The name of a ``Host`` header: ``127.0.0.1:8000`` -> ``127.0.0.1``, ``[::1]:8000`` -> ``::1``."""
    if host_header.startswith("["):
        return host_header[1:host_header.find("]")] if "]" in host_header else ""
    return host_header.rpartition(":")[0] if host_header.count(":") == 1 else host_header


def foreign_page_problem(request: Request, origins: frozenset[str] = frozenset()) -> Optional[str]:
    """Why a keyless loopback server must not answer ``request``, which came from this
    machine on behalf of a web page elsewhere (None: it did not). A browser is a loopback
    caller for every site it opens: a page of attacker.example could post a bodiless
    ``POST /conversations/{id}/cancel`` (a request the browser sends without asking), and
    after pointing its own name at 127.0.0.1 (DNS rebinding) read every transcript as the
    page's own origin. So the ``Host`` must name a loopback address and an ``Origin``, when
    the browser sends one, must be a page served on one (the Web UI, ``/docs``) or one of
    ``origins`` (the codec server's configured CORS origins)."""
    if not is_loopback(_host_name(request.headers.get("host", "").strip().lower())):
        return "this server runs without keys and answers requests addressed to 127.0.0.1, ::1 or localhost only"
    origin = request.headers.get("origin")
    if origin is not None and origin.strip().rstrip("/") not in origins and not _loopback_origin(origin):
        return "this server runs without keys and answers pages served on this machine's loopback address only"
    return None


def _loopback_origin(origin: str) -> bool:
    try:
        return is_loopback(urlsplit(origin.strip().lower()).hostname)
    except ValueError:  # not a URL ("null": a sandboxed or file page)
        return False


def presented_key(request: Request) -> Optional[str]:
    """The key a request carries: ``Authorization: Bearer <key>``, else ``X-API-Key``."""
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.headers.get("x-api-key") or None


class Access:
    """``Access(audit, tenancy, keys=None, keyless_while_none=False)``: the app's
    authentication. ``keys`` None is the keyless loopback API. With ``keys`` and
    ``keyless_while_none`` (a loopback bind), the API is keyless only while no active key
    exists, checked on every request: a key created while it runs is required from the next
    request on, without a restart. ``audit`` is where reads of personal data are recorded."""

    def __init__(self, audit: AuditLog, tenancy: Tenancy, keys: Optional[KeyStore] = None,
                 keyless_while_none: bool = False, page_origins: Optional[frozenset[str]] = None,
                 limits: Any = None) -> None:
        self.audit, self.tenancy, self.keys = audit, tenancy, keys
        self.limits = limits
        """The per-key and per-tenant limits (``starter.api.limits.ApiLimits``); None: none."""
        self.keyless_while_none = keyless_while_none and keys is not None
        self.page_origins = page_origins
        """Keyless, also refuse what a browser sends for a page elsewhere (``foreign_page_problem``),
        but for these origins; None: no such check (an app served in-process, by the tests).
        Set by the servers that listen on a real loopback socket."""
        self.sessions = sessions_for(keys)
        """The supervisors' inbox's signed browser sessions (``starter.api.inbox.sessions``)."""

    @property
    def keyless(self) -> bool:
        """True when the API currently runs without keys (loopback callers only)."""
        if self.keys is None:
            return True
        return self.keyless_while_none and self.keys.active_count() == 0

    async def authenticate(self, request: Request) -> Principal:
        """The caller of ``request``. Raises ``ConversationError`` ``unauthenticated`` (401)
        for a missing, malformed, unknown or revoked key, or a keyless API's non-loopback caller."""
        if self.keys is None or (self.keyless_while_none and await asyncio.to_thread(self.keys.active_count) == 0):
            client = request.client.host if request.client else None
            if not is_loopback(client):
                raise ConversationError("this API runs without keys and answers loopback callers only", "unauthenticated")
            problem = None if self.page_origins is None else foreign_page_problem(request, self.page_origins)
            if problem is not None:
                raise ConversationError(problem, "forbidden")
            return Principal(actor=LOCAL_ACTOR, tenant=self.tenancy.default_tenant, role=Role.OPERATOR)
        presented = presented_key(request)
        # a browser signed in to the inbox: its session cookie stands for its key on the inbox's routes
        key = await self.sessions.key_of(request, self.keys) if presented is None else None
        if key is not None:
            return Principal(actor=f"key:{key.key_id}", tenant=key.tenant, role=key.role, customer=key.customer,
                             requests_per_minute=key.requests_per_minute)
        if presented is None:
            raise ConversationError("an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'",
                                    "unauthenticated")
        key = await asyncio.to_thread(self.keys.verify, presented)
        if key is None:
            raise ConversationError("the API key is not valid (unknown, revoked or mistyped)", "unauthenticated")
        return Principal(actor=f"key:{key.key_id}", tenant=key.tenant, role=key.role, customer=key.customer,
                         requests_per_minute=key.requests_per_minute)

    async def record(self, principal: Principal, action: str, subject: str, detail: str = "") -> None:
        """Write an audit entry for ``principal``'s access to ``subject``; raises
        ``ConversationError`` ``unavailable`` if it cannot be written (nothing is then served)."""
        try:
            await asyncio.to_thread(self.audit.record, principal.actor, action, subject,
                                    f"tenant={principal.tenant} {detail}".strip())
        except Exception as err:  # noqa: BLE001 (the database's text stays in the log)
            log.warning("audit entry not written (%s); refusing the read", type(err).__name__)
            raise ConversationError("the audit log is not reachable; retry later", "unavailable") from err

    def describe(self) -> str:
        """One line for the startup banner: how callers authenticate."""
        if self.keyless:
            return ("WITHOUT authentication: no API keys are configured, so the API answers loopback callers "
                    "only, as the default tenant's operator, until a key is created with `statekeeper keys create` "
                    "(required from the next request on)")
        return "API keys required (Authorization: Bearer <key>)"


AccessSource = Callable[[], Access]
"""Builds the app's ``Access`` when it first serves (may do I/O; raises ``StartupRefused``)."""


def access_from_settings(settings: Any, host: Optional[str]) -> Access:
    """The ``Access`` of an API serving ``settings`` on ``host``: keys required when any key
    exists; keyless while none does and ``host`` is loopback (checked per request, so a key
    created while the API runs is required at once). ``host`` None (an app whose bind
    is unknown, such as ``uvicorn starter.api:app``) always needs keys. Keys and audit log live
    in the journal database. Raises ``StartupRefused`` when keys are needed and none exists."""
    from starter.runtime.preflight import StartupRefused

    url = settings.resolved_journal_url()
    try:
        keys = KeyStore(url, settings.api_key_hmac_secret() or "")
        active = keys.active_count() if host is None or not is_loopback(host) else 0
    except ValueError as err:
        raise StartupRefused("STATEKEEPER_API_KEY_SECRET is set but empty: set it to a long random value "
                             "(the same for the API and `statekeeper keys`), or unset it") from err
    except Exception as err:  # noqa: BLE001 - only storage failures are translated; the rest re-raised
        # an unreachable, damaged or newer journal database ended `statekeeper api` and
        # `codec-server` with a page of SQLAlchemy traceback instead of what to fix
        from starter.runtime.problems import storage_problem

        problem = storage_problem(err, "the journal database (API keys, audit log)")
        if problem is None:
            raise
        raise StartupRefused(problem) from None
    from starter.api.limits import ApiLimits

    audit, tenancy = AuditLog(url), Tenancy.from_settings(settings)
    limits = ApiLimits.from_settings(settings, keys.engine)
    if host is not None and is_loopback(host):
        return Access(audit, tenancy, keys, keyless_while_none=True, page_origins=frozenset(), limits=limits)
    if active > 0:
        return Access(audit, tenancy, keys, limits=limits)
    keys.close()
    where = f"on {host}" if host is not None else "where its bind address is not known (uvicorn starter.api:app)"
    raise StartupRefused(
        f"refusing to serve the API {where} without API keys: anyone who can reach it could read and change "
        "every conversation. Create a key first (`statekeeper keys create --tenant default --role service`), "
        "or run `statekeeper api --host 127.0.0.1` (loopback only, keyless)")
