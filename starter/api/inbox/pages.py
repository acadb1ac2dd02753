"""The supervisors' inbox: a small server-rendered page of the tenant's pending approvals, served
by the API (mounted by ``starter.api.application``; left out of the OpenAPI document).

    GET  /ui/sign-in                       the sign-in form (an operator key and the name decisions are recorded with)
    POST /ui/sign-in   key, approver       -> 303 /ui/approvals with a session cookie; 401/403 the form again
    POST /ui/sign-out                      -> 303 /ui/sign-in, the cookie cleared
    GET  /ui/approvals                     the inbox (without a session: 303 /ui/sign-in)
    GET  /ui/approvals/events              server-sent events of the tenant's approval changes (``feed``)
    GET  /ui/approvals/{id}/notice?decision=&answer=   -> 200 {status, final, message}: what became of a decision
    GET  /ui/static/inbox.js, inbox.css    the page's script and style (no key)

Each pending approval shows the exact detail the user confirmed, the amount, the reason, the
process, the customer's pseudonym, the time left before it expires and a link to its run in the
Temporal Web UI. Approve and Reject (with a note) are sent by the page's script to ``POST
/approvals/{approval_id}``, the API's own route, with the session's CSRF token; the page then
asks ``.../notice`` what to tell the supervisor (``words``). The page is refreshed from the
event stream (``EventSource``), never by polling, and every supervisor of the tenant watching it
sees each change.

Sign-in, sessions and CSRF: ``sessions``. No key is ever put in a URL or a page: the form posts
it once, and a failed sign-in does not send it back.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, AsyncIterator, Literal, NamedTuple, Optional
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from activities.store.api_keys import Role
from starter.api.auth import Access, Permission, Principal
from starter.api.guard import Guard, guard_dep
from starter.api.inbox import words
from starter.api.inbox.feed import Change, Feeds, InboxItem
from starter.api.inbox.sessions import INBOX, SIGN_IN, STATIC, Session, approver_problem
from starter.api.models import ApprovalId, client_dep
from starter.client.conversations import StatekeeperClient
from starter.client.errors import ConversationError
from workflows.domain.policy.approvals import ApprovalStatus

HERE = Path(__file__).resolve().parent
TEMPLATES = Jinja2Templates(directory=HERE / "templates")
STREAM_SECONDS = 300.0
"""How long one event stream stays open; the page's ``EventSource`` then reconnects and resyncs."""
KEEP_ALIVE_SECONDS = 15.0
STOP_CHECK_SECONDS = 1.0
"""How often an idle stream checks whether the server is stopping (``app.state.stopping``)."""
SYNC_SECONDS = 10.0
"""How long a new stream waits for its tenant's feed to have looked once."""
RETRY_MS = 2000
"""How soon a page reconnects a dropped stream (the event-stream ``retry:`` field)."""
SECURITY_HEADERS = {
    # scripts and styles from this server only (no inline script: an injected one does not run),
    # requests to it only, no framing (clickjacking), no referrer to the Web UI or anyone else
    # (same-origin, not no-referrer: that would make the sign-in form's Origin "null")
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

router = APIRouter(include_in_schema=False)


class WebUiLinks(NamedTuple):
    """Links into the Temporal Web UI at ``base`` (``Settings.web_ui_base``), namespace ``namespace``."""

    base: str
    namespace: str

    def run(self, workflow_id: str) -> str:
        """The page of ``workflow_id``'s latest run."""
        return f"{self.base}/namespaces/{quote(self.namespace, safe='')}/workflows/{quote(workflow_id, safe='')}"

    @classmethod
    def from_settings(cls, settings: Any) -> "WebUiLinks":
        return cls(settings.web_ui_base(), settings.temporal_namespace)


def install(app: Any, web_ui: Optional[WebUiLinks], ensure_client: Any, ensure_access: Any) -> None:
    """Mount the inbox on ``app``: its routes, its static files, and the app state they use
    (``web_ui`` None: read from ``Settings()`` on first use)."""
    app.include_router(router)
    app.mount(STATIC, StaticFiles(directory=HERE / "static"), name="inbox-static")
    app.state.inbox_web_ui = web_ui
    app.state.inbox_feeds = None

    async def feeds() -> Feeds:
        if app.state.inbox_feeds is None:
            access: Access = await ensure_access()
            app.state.inbox_feeds = Feeds(ensure_client, access.tenancy)
        return app.state.inbox_feeds

    app.state.inbox_feeds_of = feeds


async def close(app: Any) -> None:
    """Stop the inbox's feeds (the app's lifespan ends)."""
    feeds: Optional[Feeds] = getattr(app.state, "inbox_feeds", None)
    if feeds is not None:
        await feeds.close()


def _web_ui(request: Request) -> WebUiLinks:
    links = request.app.state.inbox_web_ui
    if links is None:
        from settings import Settings
        from starter.dev import state as devstate

        links = request.app.state.inbox_web_ui = WebUiLinks.from_settings(devstate.adopt(Settings()))
    return links


def _page(request: Request, name: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    return TEMPLATES.TemplateResponse(request, name, context, status_code=status, headers=SECURITY_HEADERS)


def _same_origin(request: Request) -> bool:
    """False for a form another site's page posted (its ``Origin`` is not this server's)."""
    origin = request.headers.get("origin")
    return origin is None or origin == f"{request.url.scheme}://{request.headers.get('host', '')}"


async def _access(request: Request) -> Access:
    return await request.app.state.ensure_access()


def _session(request: Request, access: Access) -> Optional[Session]:
    return getattr(request.state, "session", None) or access.sessions.read(request)


# --- signing in and out ---------------------------------------------------------------------

@router.get(SIGN_IN)
async def sign_in_form(request: Request) -> HTMLResponse:
    access = await _access(request)
    return _page(request, "sign_in.html", {"keyless": await asyncio.to_thread(lambda: access.keyless),
                                           "problem": None, "approver": ""})


@router.post(SIGN_IN)
async def sign_in(request: Request) -> Response:
    """Prove an operator key once; the browser gets a signed session instead (``sessions``).
    A wrong key is a 401, a key that is not an operator's a 403, each the form again with
    what to do (the key is never sent back)."""
    access = await _access(request)
    keyless = await asyncio.to_thread(lambda: access.keyless)
    fields = parse_qs((await request.body()).decode("utf-8", "replace"), max_num_fields=10)
    approver = (fields.get("approver") or [""])[0].strip()
    presented = (fields.get("key") or [""])[0].strip()

    def again(problem: str, status: int) -> HTMLResponse:
        shown = approver if approver_problem(approver) is None else ""
        return _page(request, "sign_in.html", {"keyless": keyless, "problem": problem, "approver": shown}, status)

    if not _same_origin(request):
        return again("Sign in from this server's own page.", 403)
    problem = approver_problem(approver)
    if problem is not None:
        return again(problem, 422)
    key_id: Optional[str] = None
    if keyless:
        try:
            principal = await access.authenticate(request)  # loopback callers only
        except ConversationError as err:
            return again(str(err)[:1].upper() + str(err)[1:] + ".", 403)
    else:
        if not presented:
            return again("Enter your operator key.", 401)
        key = await asyncio.to_thread(access.keys.verify, presented)
        if key is None:
            return again("That key is not valid: it is unknown, revoked or mistyped.", 401)
        if key.role is not Role.OPERATOR or key.customer is not None:
            return again("That is not an operator key: the inbox needs an operator key of your tenant.", 403)
        key_id = key.key_id
        principal = Principal(actor=f"key:{key.key_id}", tenant=key.tenant, role=key.role)
    try:
        await access.record(principal, "inbox_sign_in", principal.actor, f"approver={approver}")
    except ConversationError:
        return again("Signing in is not possible just now (the audit log is not reachable). Try again later.", 503)
    response = RedirectResponse(INBOX, status_code=303)
    access.sessions.start(response, request, key_id, approver)
    return response


@router.post("/ui/sign-out")
async def sign_out(request: Request) -> Response:
    """End this browser's session: its cookie is cleared."""
    response = RedirectResponse(SIGN_IN, status_code=303)
    if _same_origin(request):
        (await _access(request)).sessions.end(response, request)
    return response


# --- the inbox ------------------------------------------------------------------------------

def _row(approval: InboxItem, links: WebUiLinks, now: datetime) -> dict[str, Any]:
    """What a row of the inbox shows of ``approval``."""
    item, operation = approval.item, approval.item.operation
    return {
        "approval_id": item.approval_id,
        "key": hashlib.sha256(item.approval_id.encode("utf-8")).hexdigest()[:16],
        "readable": operation is not None,
        "detail": operation.detail if operation is not None else None,
        "tool": operation.tool.replace("_", " ") if operation is not None else None,
        "order_id": operation.order_id if operation is not None else None,
        "amount": str(operation.amount) if operation is not None else None,
        "reason": item.reason,
        "process": "Conversation" if item.process == "conversation" else "Refund",
        "process_id": item.process_id,
        "customer": approval.customer,
        "requested_at": words.when(item.requested_at) if item.requested_at else None,
        "expires_at": item.expires_at.astimezone(timezone.utc).isoformat() if item.expires_at else "",
        "expires_at_shown": words.when(item.expires_at) if item.expires_at else None,
        "time_left": words.time_left(item.expires_at, now),
        "link": links.run(approval.workflow_id),
    }


@router.get(INBOX, response_class=HTMLResponse)
async def inbox(request: Request, guard: Guard = Depends(guard_dep)) -> Response:
    """The inbox: the tenant's pending approvals, oldest first."""
    guard.require(Permission.LIST_APPROVALS)
    access = await _access(request)
    session = _session(request, access)
    if session is None:  # a key in a header, or keyless without a name for decisions: sign in first
        return RedirectResponse(SIGN_IN, status_code=303)
    feed = (await request.app.state.inbox_feeds_of()).of(guard.principal.tenant)
    queue = feed.subscribe()  # keeps the feed running while the page opens its stream
    try:
        try:
            await asyncio.wait_for(feed.synced.wait(), SYNC_SECONDS)
        except asyncio.TimeoutError:
            pass
        pending = list(feed.pending.values())
    finally:
        feed.unsubscribe(queue)
    links, now = _web_ui(request), datetime.now(timezone.utc)
    return _page(request, "approvals.html", {
        "rows": [_row(a, links, now) for a in pending], "approver": session.approver,
        "csrf": access.sessions.csrf(session), "trouble": feed.trouble,
        "signed_in_with_key": session.key_id is not None})


def _frame(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def _change_data(change: Change, links: WebUiLinks) -> dict[str, Any]:
    assert change.approval is not None  # an approval's change (``inbox.status`` has none)
    item = change.approval.item
    if change.type == "approval.requested":
        row = _row(change.approval, links, datetime.now(timezone.utc))
        html = TEMPLATES.get_template("row.html").render(row=row)
        return {"approval_id": item.approval_id, "status": item.status.value, "html": html}
    return {"approval_id": item.approval_id, "status": item.status.value, "message": words.outcome(item)}


@router.get("/ui/approvals/events")
async def approval_events(request: Request, guard: Guard = Depends(guard_dep)) -> StreamingResponse:
    """The tenant's approval changes as server-sent events: first every pending approval
    (``approval.requested``) and ``inbox.synced`` (the ids pending now), then each change as it
    happens (``approval.requested``, ``approval.decided``, ``approval.expired``,
    ``approval.withdrawn``; ``inbox.status`` when the approvals can or can no longer be read);
    a keep-alive comment while idle; the stream ends after
    ``STREAM_SECONDS`` and the page reconnects."""
    guard.require(Permission.LIST_APPROVALS)
    feed = (await request.app.state.inbox_feeds_of()).of(guard.principal.tenant)
    links = _web_ui(request)
    # the server stopping: uvicorn waits for open responses to end before it stops
    stopping = getattr(request.app.state, "stopping", lambda: False)

    async def stream() -> AsyncIterator[str]:
        queue = feed.subscribe()
        try:
            yield f"retry: {RETRY_MS}\n\n"
            try:
                await asyncio.wait_for(feed.synced.wait(), SYNC_SECONDS)
            except asyncio.TimeoutError:
                pass
            pending = list(feed.pending.values())
            for approval in pending:
                yield _frame("approval.requested", _change_data(Change("approval.requested", approval), links))
            yield _frame("inbox.synced", {"pending": [a.item.approval_id for a in pending], "trouble": feed.trouble})
            started = last_sent = time.monotonic()
            while time.monotonic() - started < STREAM_SECONDS and not stopping():
                try:
                    change = await asyncio.wait_for(queue.get(), STOP_CHECK_SECONDS)
                except asyncio.TimeoutError:
                    if time.monotonic() - last_sent >= KEEP_ALIVE_SECONDS:
                        yield ": keep-alive\n\n"
                        last_sent = time.monotonic()
                    continue
                last_sent = time.monotonic()
                if change is None:
                    return  # fell behind: the page reconnects and reads afresh
                if change.approval is None:
                    yield _frame(change.type, {"trouble": feed.trouble})
                else:
                    yield _frame(change.type, _change_data(change, links))
        finally:
            feed.unsubscribe(queue)

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


@router.get("/ui/approvals/{approval_id}/notice")
async def notice(approval_id: ApprovalId, decision: Optional[Literal["approve", "reject"]] = None,
                 answer: Optional[int] = Query(None, ge=0, le=599), guard: Guard = Depends(guard_dep),
                 client: StatekeeperClient = Depends(client_dep)) -> JSONResponse:
    """What to tell the supervisor about ``approval_id`` after their ``decision`` was answered
    ``answer`` by ``POST /approvals/{approval_id}`` (an HTTP status; 0: no answer), or without
    them, how it stands: ``{status, final, message}``, ``final`` true once it can no longer be
    decided."""
    await guard.approval(client, approval_id, Permission.LIST_APPROVALS)
    try:
        item = await client.approval(approval_id)
    except ConversationError:
        item = None
    status = item.status.value if item is not None else None
    final = item is not None and item.status is not ApprovalStatus.PENDING
    if decision is None or answer is None:
        message = words.outcome(item) if item is not None else "This approval cannot be read just now."
    elif answer == 200 and item is not None:
        message = words.own(item, decision)
    elif answer == 409:
        message = words.late(item, decision)
        final = final or item is None
    else:
        message = words.refused(answer, decision)
        final = final or answer == 404
    return JSONResponse({"status": status, "final": final, "message": message}, headers={"Cache-Control": "no-store"})
