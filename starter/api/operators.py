"""HTTP routes for operators' resolutions of escalated unknown outcomes (mounted by ``starter.api.application``).

    POST /conversations/{id}/resolutions  {step_id, outcome: applied|not_applied, operator, note}
                                          -> 200 OutcomeResolution

An operator, having checked the external system, says whether a write whose outcome was
unknown took effect (``workflows.conversation.resolution``); the conversation tells the user and goes on.
Operator keys only (403 otherwise); another tenant's conversation is a 404; the workflow's
validator refuses an unknown step, a step that is not unknown and a second resolution (409).
The authenticated caller (``key:<id>`` or ``local``) is recorded with the operator's name,
in the state and the audit log.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from starter.api.guard import Guard, guard_dep
from starter.api.models import ID_PATTERN, ConversationId, FreeText, client_dep
from starter.api.responses import responses_for
from starter.api.auth import Permission
from starter.client.conversations import StatekeeperClient
from workflows.domain.records import OutcomeResolution
from workflows.domain.user_text import ID_TEXT_PATTERN, refuse_controls

router = APIRouter()


class ResolutionIn(BaseModel):
    """Body of ``POST /conversations/{id}/resolutions``: the step (``steps[].step_id`` of the
    state), what the operator found, their name and a note saying what they checked."""

    model_config = ConfigDict(extra="forbid")

    step_id: Annotated[str, Field(min_length=1, max_length=300, json_schema_extra={"pattern": ID_TEXT_PATTERN}),
                       refuse_controls("the step id", is_id=True)]  # an id: kept exactly as the state shows it
    outcome: Literal["applied", "not_applied"]
    operator: str = Field(min_length=1, max_length=128, pattern=ID_PATTERN)
    note: FreeText(1000, "the note")  # type: ignore[valid-type]


@router.post("/conversations/{conversation_id}/resolutions", response_model=OutcomeResolution,
             responses=responses_for("POST", "/conversations/{conversation_id}/resolutions"))
async def resolve_outcome(conversation_id: ConversationId, body: ResolutionIn, guard: Guard = Depends(guard_dep),
                          client: StatekeeperClient = Depends(client_dep)) -> Any:
    """Resolve an escalated unknown outcome as applied or not applied (operators); answers the
    resolution, with what the user was told."""
    await guard.conversation(client, conversation_id, Permission.RESOLVE_OUTCOME)
    # first: a resolution whose entry cannot be written is not sent (503); written after it, an
    # unwritable entry left a resolution made and never recorded (its retry is a 409)
    await guard.audit("resolve_outcome", conversation_id, f"step={body.step_id} outcome={body.outcome} "
                                                          f"operator={body.operator}")
    return await client.resolve_outcome(conversation_id, body.step_id, body.outcome, body.operator, body.note,
                                        actor=guard.principal.actor)
