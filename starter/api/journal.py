"""HTTP route of the transcript (mounted by ``starter.api.application``).

    GET /conversations/{id}/transcript[?format=json|text]   -> 200 Transcript (JSON) or text/plain; 404

JSON by default; text for people with ``?format=text`` or ``Accept: text/plain``. The route
reads the journal (our own store, ``activities.journal``), not Temporal: a finished
conversation's transcript stays readable until it is erased or purged.
"""

from __future__ import annotations

import asyncio
from datetime import timezone
from typing import Literal, Optional

from fastapi import APIRouter, Depends, HTTPException, Request, status
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel

from activities.store.journal import JournalStore, TranscriptEntry
from starter.api.guard import Guard, guard_dep
from starter.api.models import ConversationId, client_dep
from starter.api.responses import responses_for
from starter.api.auth import Permission
from starter.client.conversations import StatekeeperClient

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
