"""An operator's resolution of an escalated unknown outcome, sent as the ``resolve_outcome``
update of the conversation (``workflows.conversation.resolution``), which waits for it.

The workflow's update validator is the authority (no such step, not unknown, already
resolved → ``ResolutionRefused``, a 409 here); a conversation that has finished (its wait
ran out, or it waited for none: ``resolution_wait_seconds`` 0) is ``finished``. Before
that, a client given evidence (``ResolutionEvidence``; ``starter.ops.bootstrap.client_for`` gives
it the systems of record, ``starter.ops.resolution_evidence.LedgerEvidence``) refuses a
resolution they contradict, or any while they cannot be asked, the same way.
"""

from __future__ import annotations

import hashlib
from typing import Optional, Protocol

from temporalio.client import Client, WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.service import RPCError, RPCStatusCode

from starter.client.core import ClientCore
from starter.client.errors import ConversationError, unreachable
from starter.client.temporal_ids import update_id
from workflows.domain.errors import ErrorType
from workflows.domain.records import OutcomeResolution
from workflows.conversation.resolution import ResolveOutcome
from workflows.conversation.workflow import support_workflow_id
from workflows.domain.user_text import control_problem


def resolution_payload(step_id: str, outcome: str, operator: str, note: str,
                       actor: Optional[str] = None) -> ResolveOutcome:
    """The update's input, validated here (``invalid`` on a bad field or a control character)."""
    for text, what in ((note, "the note"), (step_id, "the step id")):
        problem = control_problem(text, what) if isinstance(text, str) else None
        if problem is not None:
            raise ConversationError(problem, "invalid")
    try:
        return ResolveOutcome(step_id=step_id, outcome=outcome, operator=operator, note=note, actor=actor)
    except ValueError as err:
        raise ConversationError("invalid resolution: outcome is applied or not_applied; operator is an id of "
                                "1 to 128 characters (letters, digits, . _ : @ -); a note of 1 to 1000 characters "
                                "is required", "invalid") from err


def _digest(note: str) -> str:
    return hashlib.sha256(note.encode()).hexdigest()[:12]


class ResolutionEvidence(Protocol):
    """What the systems of record say of a resolution before it is sent."""

    async def contradiction(self, client: Client, conversation_id: str, step_id: str, outcome: str) -> Optional[str]:
        """Why ``outcome`` (``applied`` or ``not_applied``) contradicts the systems of record for
        step ``step_id``, or None when nothing does; a reason too when they cannot be asked."""


class ResolutionCalls(ClientCore):
    """The resolution operation of ``StatekeeperClient``."""

    _client: Client
    evidence: Optional[ResolutionEvidence] = None
    """What a resolution is checked against before it is sent (None: not checked)."""

    async def resolve_outcome(self, conversation_id: str, step_id: str, outcome: str, operator: str, note: str,
                              actor: Optional[str] = None) -> OutcomeResolution:
        """Resolve the unknown outcome of step ``step_id`` as ``applied`` or ``not_applied``,
        as ``operator`` (``actor``: the authenticated caller, recorded too); returns the
        resolution (``told``: what the user was told). The update id is the resolution itself
        (step, outcome, operator, note digest), so a retried identical call returns the first
        answer; any other one for the same step is refused as a second resolution. Raises
        ``ConversationError``: ``invalid``, ``not_found``, ``resolution_refused`` (the
        validator's reason, or the systems of record's: ``evidence``), ``finished``, ``stuck``, ``no_worker``,
        ``unavailable``, ``timeout``."""
        payload = resolution_payload(step_id, outcome, operator, note, actor)
        try:
            contradiction = (None if self.evidence is None
                             else await self.evidence.contradiction(self._client, conversation_id, step_id, outcome))
        except RPCError as err:
            raise unreachable() from err
        if contradiction is not None:
            raise ConversationError(contradiction, "resolution_refused")
        handle = self._client.get_workflow_handle(support_workflow_id(conversation_id))
        try:
            return await self.run_update(
                lambda timeout: handle.start_update(
                    "resolve_outcome", payload, wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                    id=update_id("resolve", step_id, outcome, operator, _digest(note)), rpc_timeout=timeout,
                    result_type=OutcomeResolution),
                "the resolution", stuck=lambda: self.stuck(support_workflow_id(conversation_id),
                                                            f"conversation {conversation_id}"))
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            if getattr(cause, "type", None) == ErrorType.RESOLUTION_REFUSED.value:
                raise ConversationError(getattr(cause, "message", "") or "resolution refused",
                                        "resolution_refused") from err
            raise ConversationError(f"conversation {conversation_id} has finished; nothing can be resolved in it",
                                    "finished") from err
        except RPCError as err:
            text = str(err).replace(support_workflow_id(conversation_id), "<id>").lower()
            if "completed" in text or "closed" in text or "closing" in text:
                raise ConversationError(f"conversation {conversation_id} has finished; nothing can be resolved "
                                        "in it", "finished") from err
            if err.status is RPCStatusCode.NOT_FOUND or "not found" in text:
                raise ConversationError(f"conversation {conversation_id} does not exist", "not_found") from err
            raise unreachable() from err
