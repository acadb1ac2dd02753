"""A supervisor's decision on a pending approval, sent as the ``decide_approval`` update of
the process that waits for it (a conversation or a refund).

The approval id names its workflow (``workflows.domain.policy.approvals.workflow_id_of``:
``<workflow_id>~<12 hex>``); the workflow's update validator is the authority on whether
the decision is allowed (unknown id, another operation's id, second decision, expiry →
``ApprovalRefused``, a 409 here).
"""

from __future__ import annotations

from typing import Optional

from temporalio.client import Client, WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.service import RPCError, RPCStatusCode

from starter.client.core import ClientCore
from starter.client.errors import ConversationError, outcome_unknown, unreachable
from starter.client.temporal_ids import fits, update_id
from workflows.domain.policy.approvals import Approval, ApprovalDecision, workflow_id_of
from workflows.domain.errors import ErrorType
from workflows.domain.user_text import control_problem

APPROVAL_REFUSED = ErrorType.APPROVAL_REFUSED.value
APPROVAL_UNKNOWN = ErrorType.APPROVAL_UNKNOWN.value


def approval_workflow_id(approval_id: str) -> str:
    """The workflow an approval id belongs to. Raises ``ConversationError`` ``not_found``
    for an id that is not one (no approval can have it)."""
    try:
        workflow_id = workflow_id_of(approval_id)
    except ValueError as err:
        raise ConversationError(f"approval {_shown(approval_id)} does not exist", "not_found") from err
    if not fits(workflow_id):  # longer than Temporal holds: no process has it (asked, it was a 503)
        raise ConversationError(f"approval {_shown(approval_id)} does not exist", "not_found")
    return workflow_id


def decision_payload(approval_id: str, decision: str, approver: str, note: Optional[str]) -> ApprovalDecision:
    """The update's input, validated here (``invalid`` on a bad field, or a note with a
    control character)."""
    problem = control_problem(note, "the note") if note is not None else None
    if problem is not None:
        raise ConversationError(problem, "invalid")
    fields = {"approval_id": approval_id, "decision": decision, "approver": approver, "note": note}
    try:
        return ApprovalDecision(**fields)
    except ValueError as err:
        raise ConversationError("invalid decision: decision is approve or reject; approver is an id of "
                                "1 to 128 characters; note at most 1000", "invalid") from err


def _shown(approval_id: str) -> str:
    """An approval id as quoted back in an error: caller-supplied text, so bounded."""
    return approval_id if len(approval_id) <= 80 else approval_id[:77] + "..."


class ApprovalCalls(ClientCore):
    """The approval operation of ``StatekeeperClient``."""

    _client: Client

    async def decide_approval(self, approval_id: str, decision: str, approver: str,
                              note: Optional[str] = None) -> Approval:
        """Approve or reject ``approval_id`` as ``approver``; returns the decided ``Approval``.

        The update id is the decision itself, so a retried identical call returns the first
        answer. Raises ``ConversationError``: ``not_found`` (no such process, or an approval id
        it never issued, another operation's included), ``approval_refused`` (the validator's
        reason: already decided, withdrawn, expired), ``stuck`` (its process's workflow tasks
        keep failing), ``invalid``, ``no_worker``, and ``outcome_unknown`` when Temporal
        stopped answering while the decision was on its way (send the same decision again)."""
        workflow_id = approval_workflow_id(approval_id)
        payload = decision_payload(approval_id, decision, approver, note)
        handle = self._client.get_workflow_handle(workflow_id)
        try:
            return await self.run_update(
                lambda timeout: handle.start_update(
                    "decide_approval", payload, wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                    id=update_id("decide", approval_id, decision, approver), rpc_timeout=timeout, result_type=Approval),
                "the decision", unknown=outcome_unknown(
                    "the decision", f"send the same decision again ({decision} by {approver})"),
                stuck=lambda: self.stuck(workflow_id, f"the process of approval {_shown(approval_id)}"))
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            if getattr(cause, "type", None) == APPROVAL_REFUSED:
                raise ConversationError(getattr(cause, "message", "") or "decision refused",
                                        "approval_refused") from err
            # APPROVAL_UNKNOWN: the process never issued this id (another operation's included)
            why = f": {cause.message}" if getattr(cause, "type", None) == APPROVAL_UNKNOWN else ""
            raise ConversationError(f"approval {_shown(approval_id)} does not exist{why}", "not_found") from err
        except RPCError as err:
            text = str(err).lower()
            # a finished process answers NOT_FOUND too ("workflow execution already completed"):
            # its approval existed and can no longer be decided, which is a conflict, not a 404
            if "completed" in text or "closed" in text or "closing" in text:
                raise ConversationError(f"approval {_shown(approval_id)} is no longer pending: its process has finished",
                                        "approval_refused") from err
            if err.status is RPCStatusCode.NOT_FOUND or "not found" in text:
                raise ConversationError(f"approval {_shown(approval_id)} does not exist", "not_found") from err
            raise unreachable() from err
