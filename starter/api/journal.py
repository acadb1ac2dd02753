"""HTTP routes that read the journal: the transcript and the event stream (mounted by
``starter.api.application``).

    GET /conversations/{id}/transcript[?format=json|text]   -> 200 Transcript (JSON) or text/plain; 404
    GET /conversations/{id}/events[?wait=seconds]   (Last-Event-ID: n)   -> 200 text/event-stream; 404

JSON by default; text for people with ``?format=text`` or ``Accept: text/plain``. The route
reads the journal (our own store, ``activities.journal``), not Temporal: a finished
conversation's transcript stays readable until it is erased or purged.

The event stream is server-sent events: each event is ``id: <sequence>``, ``event: <type>``,
``data: <the event's JSON>`` (``workflows.domain.journal.PublicEvent``), in sequence order. A
client that reconnects with ``Last-Event-ID: n`` gets the events after sequence ``n`` only. The
stream ends once the conversation's run is closed and every event it recorded was sent; while
there is nothing to send it says ``: keep-alive`` every ``KEEP_ALIVE_SECONDS``, and after
``wait`` seconds with nothing to send it ends (the client reconnects with its last id). The
events are read from the journal's database (``JournalStore.events``): ``docs/events.md``.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timezone
from typing import AsyncIterator, Literal, Optional

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request, status
from fastapi.responses import PlainTextResponse, StreamingResponse
from pydantic import BaseModel

from activities.store.journal import JournalStore, TranscriptEntry
from starter.api.guard import Guard, guard_dep
from starter.api.models import ConversationId, client_dep
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


async def _serving(client: StatekeeperClient, conversation_id: str) -> Optional[bool]:
    try:
        return await client.serving(conversation_id)
    except Exception as err:  # noqa: BLE001 (Temporal's text stays out of the answer)
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail="Temporal is not reachable") from err


async def _read(journal: JournalStore, conversation_id: str, after: int) -> list[PublicEvent]:
    try:
        return await asyncio.to_thread(journal.events, conversation_id, after)
    except Exception as err:  # noqa: BLE001 (the database's text stays out of the answer)
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail="the journal is not reachable") from err


@router.get("/conversations/{conversation_id}/events", response_class=StreamingResponse,
            responses=responses_for("GET", "/conversations/{conversation_id}/events", extra={
                200: {"description": "Server-sent events (`text/event-stream`): per event `id:` its sequence, "
                                     "`event:` its type, `data:` the event as JSON `{id, type, timestamp, sequence, "
                                     "data}`; `: keep-alive` comments while idle. Ends after the last event of a "
                                     "finished conversation, or after `wait` seconds without an event.",
                      "content": {"text/event-stream": {"schema": {"type": "string"}}}}}))
async def get_events(conversation_id: ConversationId, request: Request,
                     wait: int = Query(DEFAULT_WAIT_SECONDS, ge=0, le=MAX_WAIT_SECONDS,
                                       description="Seconds the stream stays open with nothing to send before it "
                                                   "ends (reconnect with `Last-Event-ID` to go on)."),
                     last_event_id: str = Header("0", alias="Last-Event-ID", pattern=LAST_EVENT_ID,
                                                           description="Resume after this event's sequence."),
                     guard: Guard = Depends(guard_dep), journal: JournalStore = Depends(journal_dep),
                     client: StatekeeperClient = Depends(client_dep)) -> StreamingResponse:
    """The conversation's events as server-sent events, from the start or after `Last-Event-ID`.
    Keyed callers read the events of their tenant's conversations while the run is retained;
    404 for an unknown conversation and for another tenant's."""
    after = int(last_event_id or "0")  # its pattern: LAST_EVENT_ID
    await guard.conversation(client, conversation_id, Permission.READ_CONVERSATION)
    first = await _read(journal, conversation_id, after)
    running = await _serving(client, conversation_id)
    if running is None and not first and not await asyncio.to_thread(journal.knows, conversation_id):
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no conversation {conversation_id}")

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
            elif now - quiet_since >= wait:
                return
            else:
                if now - last_sent >= KEEP_ALIVE_SECONDS:
                    yield ": keep-alive\n\n"
                    last_sent = now
                if now - last_check >= RUN_CHECK_SECONDS:
                    last_check = now
                    # closed: read once more (its last records were written before it closed)
                    closed_seen = await client.serving(conversation_id) is not True
                    if closed_seen:
                        batch = await asyncio.to_thread(journal.events, conversation_id, after)
                        continue
                if await request.is_disconnected():
                    return
                await asyncio.sleep(POLL_SECONDS)
            batch = await asyncio.to_thread(journal.events, conversation_id, after)

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
