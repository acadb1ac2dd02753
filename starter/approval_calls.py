"""A supervisor's decision on a pending approval, sent as the ``decide_approval`` update of
the process that waits for it (a conversation or a refund).

The approval id names its workflow (``workflows.approvals.workflow_id_of``:
``<workflow_id>~<12 hex>``); the workflow's update validator is the authority on whether
the decision is allowed (unknown id, another operation's id, second decision, expiry →
``ApprovalRefused``, a 409 here).
"""

from __future__ import annotations

import re
from typing import Any, Optional

from temporalio.client import Client, WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.service import RPCError, RPCStatusCode

from starter.core import ClientCore
from starter.errors import ConversationError, unreachable

APPROVAL_ID = re.compile(r"^(?P<workflow>[A-Za-z0-9][A-Za-z0-9._:@#-]{0,200})~(?P<tag>[0-9a-f]{12})$")
"""``<workflow_id>~<12 hex>``, as ``workflows.approvals.approval_id_for`` makes them."""
APPROVAL_REFUSED = "ApprovalRefused"
"""``ErrorType.APPROVAL_REFUSED.value`` (declared by ``workflows.errors`` with approvals)."""


def approval_workflow_id(approval_id: str) -> str:
    """The workflow an approval id belongs to. Raises ``ConversationError`` ``not_found``
    for an id that is not one (no approval can have it)."""
    try:
        from workflows.approvals import workflow_id_of  # the authority, once approvals exist
    except ImportError:
        workflow_id_of = None
    if workflow_id_of is not None:
        try:
            return workflow_id_of(approval_id)
        except ValueError as err:
            raise ConversationError(f"approval {approval_id} does not exist", "not_found") from err
    match = APPROVAL_ID.fullmatch(approval_id)
    if match is None:
        raise ConversationError(f"approval {approval_id} does not exist", "not_found")
    return match.group("workflow")


def decision_payload(approval_id: str, decision: str, approver: str, note: Optional[str]) -> Any:
    """The update's input: ``workflows.approvals.ApprovalDecision`` when that module exists
    (validated here, ``invalid`` on a bad field), else the same fields as a dict."""
    fields = {"approval_id": approval_id, "decision": decision, "approver": approver, "note": note}
    try:
        from workflows.approvals import ApprovalDecision
    except ImportError:
        return fields
    try:
        return ApprovalDecision(**fields)
    except ValueError as err:
        raise ConversationError("invalid decision: decision is approve or reject; approver is an id of "
                                "1 to 128 characters; note at most 1000", "invalid") from err


class ApprovalCalls(ClientCore):
    """The approval operation of ``StatekeeperClient``."""

    _client: Client

    async def decide_approval(self, approval_id: str, decision: str, approver: str,
                              note: Optional[str] = None) -> Any:
        """Approve or reject ``approval_id`` as ``approver``; returns the decided ``Approval``.

        The update id is the decision itself, so a retried identical call returns the first
        answer. Raises ``ConversationError``: ``not_found`` (no such approval or process),
        ``approval_refused`` (the validator's reason: another operation's id, already
        decided, expired), ``invalid``, ``no_worker``, ``unavailable``."""
        workflow_id = approval_workflow_id(approval_id)
        payload = decision_payload(approval_id, decision, approver, note)
        handle = self._client.get_workflow_handle(workflow_id)
        try:
            from workflows.approvals import Approval
        except ImportError:
            Approval = None  # noqa: N806 (the class, when approvals exist)
        try:
            return await self.run_update(
                lambda timeout: handle.start_update(
                    "decide_approval", payload, wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                    id=f"decide-{approval_id}-{decision}-{approver}", rpc_timeout=timeout, result_type=Approval),
                "the decision")
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            if getattr(cause, "type", None) == APPROVAL_REFUSED:
                raise ConversationError(getattr(cause, "message", "") or "decision refused",
                                        "approval_refused") from err
            raise ConversationError(f"approval {approval_id} does not exist", "not_found") from err
        except RPCError as err:
            text = str(err).lower()
            if err.status is RPCStatusCode.NOT_FOUND or "not found" in text:
                raise ConversationError(f"approval {approval_id} does not exist", "not_found") from err
            if "completed" in text or "closed" in text:
                raise ConversationError(f"approval {approval_id} is no longer pending: its process has finished",
                                        "approval_refused") from err
            raise unreachable() from err
