"""HTTP routes that read the journal: the transcript and the event stream (mounted by
``starter.api.application``).

    GET /conversations/{id}/transcript[?format=json|text]   -> 200 Transcript (JSON) or text/plain; 404
    GET /conversations/{id}/events[?wait=seconds]   (Last-Event-ID: n)   -> 200 text/event-stream; 404; 409
    GET /refunds/{id}/events[?wait=seconds]         (Last-Event-ID: n)   -> 200 text/event-stream; 404; 409

JSON by default; text for people with ``?format=text`` or ``Accept: text/plain``. The route
reads the journal (our own store, ``activities.journal``), not Temporal: a finished
conversation's transcript stays readable until it is erased or purged.

The event stream of a conversation or a refund (one implementation, ``event_stream``) is
server-sent events: each event is ``id: <sequence>``, ``event: <type>``, ``data: <the event's
JSON>`` (``workflows.domain.journal.PublicEvent``), in sequence order. A client that reconnects
with ``Last-Event-ID: n`` gets the events after sequence ``n`` only; an ``n`` above the stream's
last event is a 409 (never an id of this stream, or its events were removed). The stream ends
once the process's run is closed and every event it recorded was sent; while
there is nothing to send it says ``: keep-alive`` every ``KEEP_ALIVE_SECONDS``, and after
``wait`` seconds with nothing to send it ends (the client reconnects with its last id). The
events are read from the journal's database (``JournalStore.events``): ``docs/events.md``.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timezone
from typing import Any, AsyncIterator, Awaitable, Callable, Literal, NamedTuple, Optional

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request, status
from fastapi.responses import PlainTextResponse, StreamingResponse
from pydantic import BaseModel

from activities.store.journal import JournalStore, TranscriptEntry
from starter.api.guard import Guard, guard_dep
from starter.api.models import ConversationId, RefundId, client_dep
from starter.api.responses import responses_for
from starter.api.auth import Permission
from starter.client.conversations import StatekeeperClient
from workflows.domain.journal import PublicEvent

router = APIRouter()


def printable(text: str) -> str:
    """``text`` safe for a terminal: control and other non-printing characters (escape
    sequences that would retitle or clear an operator's terminal, bidi overrides) are
    shown as ``\\xNN`` / ``\\uNNNN``; line breaks stay."""
    return "".join(c if c == "\n" or c.isprintable() else
                   (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}") for c in text)


def transcript_text(entries: list[TranscriptEntry]) -> str:
    """The transcript for people: one entry per line, ``[turn N, time UTC] who: text`` (a
    text's own line breaks continue on lines indented by four spaces; non-printing
    characters escaped, ``printable``)."""
    lines = []
    for e in entries:
        who = "user" if e.role == "user" else ("assistant" if e.kind == "reply" else f"assistant ({e.kind})")
        text = printable(e.text).replace("\n", "\n    ")
        lines.append(f"[turn {e.turn}, {e.at.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC] {who}: {text}")
    return "\n".join(lines) + ("\n" if lines else "")


class Transcript(BaseModel):
    """A conversation's whole transcript: every user message (with its client message id)
    and every text the user was shown, in order, each with its turn and time (UTC)."""

    conversation_id: str
    entries: list[TranscriptEntry]


async def journal_dep(request: Request) -> JournalStore:
    """The app's ``JournalStore`` (opened on first use); 503 while its database is unreachable."""
    try:
        return await request.app.state.ensure_journal()
    except Exception as err:  # noqa: BLE001 (any database failure is the same 503 to the caller)
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail="the journal is not reachable") from err


def _wants_text(request: Request, format: Optional[str]) -> bool:
    if format is not None:
        return format == "text"
    accept = request.headers.get("accept", "")
    return "text/plain" in accept and "application/json" not in accept


@router.get("/conversations/{conversation_id}/transcript", response_model=Transcript,
            responses=responses_for("GET", "/conversations/{conversation_id}/transcript", extra={
                200: {"description": "The transcript: JSON (`Transcript`), or text for people with `?format=text` "
                                     "or `Accept: text/plain` (one line per entry: `[turn N, time UTC] who: text`).",
                      "content": {"text/plain": {"schema": {"type": "string"}}}}}))
async def get_transcript(conversation_id: ConversationId, request: Request,
                         format: Optional[Literal["json", "text"]] = None,
                         guard: Guard = Depends(guard_dep), journal: JournalStore = Depends(journal_dep),
                         client: StatekeeperClient = Depends(client_dep)):
    """The conversation's whole transcript (not only the state's window of recent turns); audited.
    Keyed callers read it while the conversation's run is retained (its tenant is on the run)."""
    await guard.conversation(client, conversation_id, Permission.READ_CONVERSATION)
    await guard.audit("read_transcript", conversation_id, f"format={'text' if _wants_text(request, format) else 'json'}")
    try:
        entries = await asyncio.to_thread(journal.transcript, conversation_id)
    except Exception as err:  # noqa: BLE001 (the database's text stays out of the answer)
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail="the journal is not reachable") from err
    if not entries:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no transcript for conversation {conversation_id}")
    if _wants_text(request, format):
        return PlainTextResponse(transcript_text(entries))
    return Transcript(conversation_id=conversation_id, entries=entries)


# --- the event stream ---------------------------------------------------------------------

POLL_SECONDS = 0.5
"""How often an idle stream looks for new events in the journal."""
RUN_CHECK_SECONDS = 2.0
"""How often an idle stream asks Temporal whether the conversation's run is still running."""
KEEP_ALIVE_SECONDS = 15.0
"""The longest an open stream stays silent: proxies close connections idle for longer."""
LAST_EVENT_ID = r"^[0-9]{0,18}$"
"""A ``Last-Event-ID``: the sequence of an event (a whole number from 0, at most 18 digits); empty
is no id (the event-stream standard's reset), as if none was sent."""
DEFAULT_WAIT_SECONDS = 300
MAX_WAIT_SECONDS = 3600


def sse_frame(event: PublicEvent) -> str:
    """One server-sent event: ``id:`` the sequence, ``event:`` the type, ``data:`` the JSON (one line)."""
    body = json.dumps(event.model_dump(mode="json"), separators=(",", ":"), sort_keys=True)
    return f"id: {event.sequence}\nevent: {event.type}\ndata: {body}\n\n"


class EventSource(NamedTuple):
    """What one process's event stream reads: ``read(after)`` its events after a sequence (the
    journal, a blocking call), ``last()`` the highest sequence the journal holds for it,
    ``serving()`` whether its run is running (None: no run), ``known()`` whether the journal
    holds anything of it; ``missing`` the 404's words."""

    read: Callable[[int], list[PublicEvent]]
    last: Callable[[], int]
    serving: Callable[[], Awaitable[Optional[bool]]]
    known: Callable[[], bool]
    missing: str


async def _serving(source: EventSource) -> Optional[bool]:
    try:
        return await source.serving()
    except Exception as err:  # noqa: BLE001 (Temporal's text stays out of the answer)
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail="Temporal is not reachable") from err


async def _journal(call: Callable[..., Any], *args: Any) -> Any:
    try:
        return await asyncio.to_thread(call, *args)
    except Exception as err:  # noqa: BLE001 (the database's text stays out of the answer)
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail="the journal is not reachable") from err


def ahead(after: int, last: int) -> str:
    """The 409's words for a ``Last-Event-ID`` of ``after`` above the stream's ``last`` event."""
    return (f"Last-Event-ID {after} is past the last event of this stream ({last}): events are never taken back, "
            "so it is not an id of this stream, or the stream's events were removed (retention or erasure "
            f"removes a process's events whole); reconnect with a Last-Event-ID of {last} or less, or without one")


async def event_stream(request: Request, source: EventSource, last_event_id: str, wait: int) -> StreamingResponse:
    """The server-sent events of ``source`` after ``last_event_id`` (see the module): 404 when the
    process has neither a run nor events, 409 when ``last_event_id`` is above its last event."""
    after = int(last_event_id or "0")  # its pattern: LAST_EVENT_ID
    first = await _journal(source.read, after)
    running = await _serving(source)
    if running is None and not first and not await _journal(source.known):
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=source.missing)
    if after and not first:
        last = await _journal(source.last)
        if last < after:
            raise HTTPException(status.HTTP_409_CONFLICT, detail=ahead(after, last))

    # the server stopping: uvicorn waits for open responses to end before it stops
    stopping = getattr(request.app.state, "stopping", lambda: False)

    async def stream() -> AsyncIterator[str]:
        nonlocal after, running
        batch, closed_seen = first, running is not True
        quiet_since = last_sent = last_check = time.monotonic()
        while True:
            for event in batch:
                yield sse_frame(event)
                after = event.sequence
            now = time.monotonic()
            if batch:
                quiet_since = last_sent = now
            elif closed_seen:
                return  # the run was closed before this read: nothing more can come
            elif now - quiet_since >= wait or stopping():
                return
            else:
                if now - last_sent >= KEEP_ALIVE_SECONDS:
                    yield ": keep-alive\n\n"
                    last_sent = now
                if now - last_check >= RUN_CHECK_SECONDS:
                    last_check = now
                    # closed: read once more (its last records were written before it closed)
                    closed_seen = await source.serving() is not True
                    if closed_seen:
                        batch = await asyncio.to_thread(source.read, after)
                        continue
                if await request.is_disconnected():
                    return
                await asyncio.sleep(POLL_SECONDS)
            batch = await asyncio.to_thread(source.read, after)

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _stream_doc(process: str) -> dict[int | str, dict[str, Any]]:
    return {200: {"description": "Server-sent events (`text/event-stream`): per event `id:` its sequence, "
                                 "`event:` its type, `data:` the event as JSON `{id, type, timestamp, sequence, "
                                 f"data}}`; `: keep-alive` comments while idle. Ends after the last event of a "
                                 f"finished {process}, or after `wait` seconds without an event. 409 when "
                                 "`Last-Event-ID` is above the stream's last event.",
                  "content": {"text/event-stream": {"schema": {"type": "string"}}}}}


WAIT = Query(DEFAULT_WAIT_SECONDS, ge=0, le=MAX_WAIT_SECONDS,
             description="Seconds the stream stays open with nothing to send before it ends (reconnect with "
                         "`Last-Event-ID` to go on).")
RESUME = Header("0", alias="Last-Event-ID", pattern=LAST_EVENT_ID,
                description="Resume after this event's sequence (at most the stream's last: above it is a 409).")


@router.get("/conversations/{conversation_id}/events", response_class=StreamingResponse,
            responses=responses_for("GET", "/conversations/{conversation_id}/events",
                                    extra=_stream_doc("conversation")))
async def get_events(conversation_id: ConversationId, request: Request, wait: int = WAIT,
                     last_event_id: str = RESUME, guard: Guard = Depends(guard_dep),
                     journal: JournalStore = Depends(journal_dep),
                     client: StatekeeperClient = Depends(client_dep)) -> StreamingResponse:
    """The conversation's events as server-sent events, from the start or after `Last-Event-ID`.
    Keyed callers read the events of their tenant's conversations while the run is retained;
    404 for an unknown conversation and for another tenant's."""
    await guard.conversation(client, conversation_id, Permission.READ_CONVERSATION)
    return await event_stream(request, EventSource(
        read=lambda after: journal.events(conversation_id, after),
        last=lambda: journal.last_sequence("conversation", conversation_id),
        serving=lambda: client.serving(conversation_id),
        known=lambda: journal.knows(conversation_id),
        missing=f"no conversation {conversation_id}"), last_event_id, wait)


@router.get("/refunds/{refund_id}/events", response_class=StreamingResponse,
            responses=responses_for("GET", "/refunds/{refund_id}/events", extra=_stream_doc("refund")))
async def get_refund_events(refund_id: RefundId, request: Request, wait: int = WAIT,
                            last_event_id: str = RESUME, guard: Guard = Depends(guard_dep),
                            journal: JournalStore = Depends(journal_dep),
                            client: StatekeeperClient = Depends(client_dep)) -> StreamingResponse:
    """The refund's events as server-sent events, as a conversation's. Keyed callers read the
    events of their tenant's refunds while the run is retained; 404 for an unknown refund and
    for another tenant's."""
    await guard.refund(client, refund_id, retained=True)
    return await event_stream(request, EventSource(
        read=lambda after: journal.refund_events(refund_id, after),
        last=lambda: journal.last_sequence("refund", refund_id),
        serving=lambda: client.run_serving(refund_id),
        known=lambda: journal.last_sequence("refund", refund_id) > 0,
        missing=f"refund {refund_id} does not exist"), last_event_id, wait)
