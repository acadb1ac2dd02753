"""Browser sessions of the supervisors' inbox: an operator key is proved once, at sign-in, and the
browser then holds a signed session cookie instead of the key.

The cookie (``COOKIE``) is ``itsdangerous``-signed JSON ``{"k": key id, "a": approver, "n":
nonce}`` with its signing time: the key id is public (``activities.store.api_keys``), the key's
secret is never in it. It is ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other
site's page or link sends it), ``Secure`` when the page came over https, and lasts
``SESSION_SECONDS``; its signing key is derived from the API keys' server secret
(``KeyStore.derived_secret``), so every API process of a deployment accepts it.

A session stands for its key only on the inbox's routes (``SESSION_PATHS``: the pages and
``GET/POST /approvals...``); elsewhere the cookie is ignored and a key is required as before. On
every request the key is looked up again: revoking it ends its sessions at once. A request that
changes something (any method but GET and HEAD) must also send the session's CSRF token
(``csrf``, in the page) in the ``X-CSRF-Token`` header, which a form or link on another site
cannot set.

Keyless (the loopback dev API) the cookie carries only the approver's name: authentication is
the loopback address, as for every other route (``starter.api.auth``).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
import secrets
from typing import Any, NamedTuple, Optional

from fastapi import Request
from fastapi.responses import Response
from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer

from starter.client.errors import ConversationError
from workflows.domain.policy.approvals import APPROVER_PATTERN

INBOX = "/ui/approvals"
"""The inbox page."""
SIGN_IN = "/ui/sign-in"
SIGN_OUT = "/ui/sign-out"
STATIC = "/ui/static"
"""Where the inbox's script and style are served (no key: they hold nothing of anyone's)."""
OPEN_UI_PATHS = frozenset({SIGN_IN, SIGN_OUT})
"""Inbox paths served without a key or session: signing in and out."""
COOKIE = "statekeeper_inbox"
SESSION_SECONDS = 8 * 3600
"""How long a sign-in lasts (8 hours: a supervisor's shift); then the inbox asks for the key again."""
CSRF_HEADER = "X-CSRF-Token"
SESSION_PATHS = re.compile(r"^/(ui/|approvals(/|$))")
"""Paths on which a session cookie stands for its key: the inbox and the approval routes it calls."""
APPROVER = re.compile(APPROVER_PATTERN)
MAX_APPROVER = 128
SAFE_METHODS = frozenset({"GET", "HEAD"})


class Session(NamedTuple):
    """A signed-in browser: the key it proved (None keyless), the approver name decisions are
    sent with, and the nonce its CSRF token is derived from."""

    key_id: Optional[str]
    approver: str
    nonce: str


def approver_problem(name: str) -> Optional[str]:
    """Why ``name`` cannot be a decision's approver, in words for the sign-in page; None if it can."""
    if not name:
        return "Enter your name as it should be recorded with your decisions."
    if len(name) > MAX_APPROVER or not APPROVER.fullmatch(name):
        return (f"A name for decisions is 1 to {MAX_APPROVER} characters: letters, digits and . _ : @ - "
                "(no spaces), starting with a letter or a digit, e.g. sup-ana.")
    return None


class InboxSessions:
    """``InboxSessions(secret)``: makes and checks the inbox's session cookies with ``secret``
    (bytes; derived from the API keys' server secret, or random per process when keyless)."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret
        self._signer = URLSafeTimedSerializer(secret, salt="statekeeper-inbox-session")

    def csrf(self, session: Session) -> str:
        """The CSRF token of ``session``: ``HMAC-SHA256(secret, "csrf:" nonce)``, hex."""
        return hmac.new(self._secret, f"csrf:{session.nonce}".encode("ascii"), hashlib.sha256).hexdigest()

    def start(self, response: Response, request: Request, key_id: Optional[str], approver: str) -> Session:
        """Set a new session's cookie on ``response``; returns the session."""
        session = Session(key_id, approver, secrets.token_urlsafe(16))
        value = self._signer.dumps({"k": key_id, "a": approver, "n": session.nonce})
        response.set_cookie(COOKIE, value, max_age=SESSION_SECONDS, path="/", httponly=True, samesite="strict",
                            secure=request.url.scheme == "https")
        return session

    @staticmethod
    def end(response: Response, request: Request) -> None:
        """Clear the session cookie on ``response`` (sign-out)."""
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict",
                               secure=request.url.scheme == "https")

    def read(self, request: Request) -> Optional[Session]:
        """The session ``request``'s cookie holds, if it is ours, signed and not older than
        ``SESSION_SECONDS``; else None."""
        value = request.cookies.get(COOKIE)
        if not value:
            return None
        try:
            fields: Any = self._signer.loads(value, max_age=SESSION_SECONDS)
        except (SignatureExpired, BadSignature):
            return None
        if not isinstance(fields, dict) or not isinstance(fields.get("a"), str) or not isinstance(fields.get("n"), str):
            return None
        key_id = fields.get("k")
        return Session(key_id if isinstance(key_id, str) else None, fields["a"], fields["n"])

    def csrf_problem(self, request: Request, session: Session) -> Optional[str]:
        """Why ``request`` may not change anything with ``session`` (None: it may): a request
        other than GET/HEAD must carry the session's CSRF token."""
        if request.method in SAFE_METHODS:
            return None
        sent = request.headers.get(CSRF_HEADER, "")
        if not sent or not hmac.compare_digest(sent, self.csrf(session)):
            return "this page's form token is missing or out of date: reload the page and try again"
        return None

    async def key_of(self, request: Request, keys: Any) -> Optional[Any]:
        """The active ``ApiKey`` that ``request``'s session stands for on a ``SESSION_PATHS``
        route, or None when there is no session cookie or the route is not one of them (the
        caller then needs a key as usual). Raises ``ConversationError``: ``unauthenticated``
        for a session that is expired, forged, or whose key was revoked; ``forbidden`` for a
        change without the CSRF token."""
        if COOKIE not in request.cookies or not SESSION_PATHS.match(request.url.path):
            return None
        session = self.read(request)
        if session is None or session.key_id is None:
            raise ConversationError("your sign-in has expired: sign in again", "unauthenticated")
        problem = self.csrf_problem(request, session)
        if problem is not None:
            raise ConversationError(problem, "forbidden")
        key = await asyncio.to_thread(keys.active_key, session.key_id)
        if key is None:
            raise ConversationError("the key you signed in with was revoked: sign in again", "unauthenticated")
        request.state.session = session
        return key


def sessions_for(keys: Any) -> InboxSessions:
    """The sessions of an API with ``keys`` (a ``KeyStore``), or of a keyless one (None)."""
    secret = keys.derived_secret("inbox-session") if keys is not None else secrets.token_bytes(32)
    return InboxSessions(secret)
