"""``statekeeper resume``: reset a conversation's run to its last completed workflow task,
only on a ``resume`` verdict of ``starter.replay_check.check`` (issue 7 item 6)."""

from __future__ import annotations

import uuid

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client

from starter.replay_check import ReplayReport


class ResumeRefused(Exception):
    """``resume`` on a ``refuse`` verdict: nothing was changed; ``reasons`` say why."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


async def resume(client: Client, report: ReplayReport, identity: str = "statekeeper resume") -> str:
    """Reset the report's run to its last completed workflow task (``reset_event_id``);
    returns the new run's id. Raises ``ResumeRefused`` unless the verdict is ``resume``
    (nothing is changed then), ``RPCError`` when Temporal refuses the reset."""
    if report.verdict != "resume" or report.reset_event_id is None:
        raise ResumeRefused(report.reasons)
    current = (await client.get_workflow_handle(report.workflow_id).describe()).run_id
    if current != report.run_id:  # e.g. another operator's resume: check the new run first
        raise ResumeRefused([f"the conversation has another run since the check ({current}): check it again"])
    answer = await client.workflow_service.reset_workflow_execution(ResetWorkflowExecutionRequest(
        namespace=client.namespace,
        workflow_execution=WorkflowExecution(workflow_id=report.workflow_id, run_id=report.run_id or ""),
        reason=f"{identity}: safe-replay verdict resume", workflow_task_finish_event_id=report.reset_event_id,
        request_id=str(uuid.uuid4()), identity=identity))  # signals and updates after the point: re-applied
    return answer.run_id
