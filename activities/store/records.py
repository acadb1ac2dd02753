"""The journal's row models: a model call as the model activity records it, a decision row
(a call joined with its verdict), a transcript entry and an erasure's counts
(``activities.store.journal``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Optional

from pydantic import BaseModel


class ModelCallRecord(BaseModel):
    """One model call, as the model activity records it. ``view`` is the state view the
    prompt was rendered from; ``proposal`` the parsed ``ProposedAction`` as JSON (None when
    the output was malformed or the call failed); ``stop_reason`` the API's (None when no
    response came)."""

    conversation_id: str
    turn: int
    call_seq: int
    customer_id: Optional[str] = None
    prompt_version: str
    model: str
    view: dict[str, Any]
    proposal: Optional[dict[str, Any]] = None
    stop_reason: Optional[str] = None
    input_tokens: int = 0
    """Input tokens not read from or written to the prompt cache."""
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    recorded_at: datetime


class DecisionRow(ModelCallRecord):
    """A model call joined with the workflow's verdict on it (verdict fields None while the
    turn has not been recorded). Verdict values: ``workflows.domain.journal.Verdict``; ``outcome``:
    ``workflows.domain.contracts.Outcome`` values."""

    verdict: Optional[str] = None
    rule: Optional[str] = None
    reason: Optional[str] = None
    outcome: Optional[str] = None


class TranscriptEntry(BaseModel):
    """One transcript entry, in conversation order: user turn ``turn``, entry ``seq``.
    ``role`` user/assistant, ``kind`` message/reply/notice/cancellation
    (``workflows.domain.journal``); ``message_id`` is the client's id of a user message."""

    conversation_id: str
    turn: int
    seq: int
    role: str
    kind: str
    text: str
    message_id: Optional[str] = None
    at: datetime


class Erased(BaseModel):
    """Rows removed by an erasure or a purge, per table, and the conversations concerned."""

    conversations: int = 0
    model_calls: int = 0
    verdicts: int = 0
    transcript: int = 0
    events: int = 0
    refund_events: int = 0
