"""``statekeeper resume``: reset a conversation's run to its last completed workflow task,
only on a ``resume`` verdict of ``starter.replay_check.check`` (issue 7 item 6).

A check is resumed at most once, even by two operators at the same moment: Temporal neither
deduplicates resets by request id nor refuses to reset a run that another reset has just
replaced, so before resetting, ``resume`` claims the check with a marker workflow whose id
is the check's (the conversation, its run, the reset point). Temporal refuses a second start
of that id, so exactly one claim wins; the marker is closed at once and stays in the
namespace's history as the record of who resumed (``identity``, in its memo).
"""

from __future__ import annotations

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from starter.replay_check import ReplayReport

CLAIM_WORKFLOW_TYPE = "ResumeClaim"
"""The marker's workflow type: no worker runs it (it is terminated as soon as it starts)."""
CLAIM_TASK_QUEUE = "statekeeper-resume-claims"
"""A queue no worker polls, so the marker never gets a workflow task."""


class ResumeRefused(Exception):
    """``resume`` on a ``refuse`` verdict: nothing was changed; ``reasons`` say why."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


async def resume(client: Client, report: ReplayReport, identity: str = "statekeeper resume") -> str:
    """Reset the report's run to its last completed workflow task (``reset_event_id``);
    returns the new run's id. Raises ``ResumeRefused`` unless the verdict is ``resume``, when
    the conversation has another run since the check or its run has more events than the
    check read, or when the check was already resumed
    (nothing is changed then); ``RPCError`` when Temporal refuses the reset."""
    if report.verdict != "resume" or report.reset_event_id is None:
        raise ResumeRefused(report.reasons)
    described = await client.get_workflow_handle(report.workflow_id).describe()
    current = described.run_id
    if current != report.run_id:  # e.g. another operator's resume: check the new run first
        raise ResumeRefused([f"the conversation has another run since the check ({current}): check it again"])
    if report.history_length is not None and described.history_length != report.history_length:
        # e.g. a send without keys started after the check: a reset would run it again while
        # the first attempt may still land (the check would have said unproven)
        raise ResumeRefused([f"the run has moved on since the check ({report.history_length} events, now "
                             f"{described.history_length}): check it again"])
    await _claim(client, report, identity)
    answer = await client.workflow_service.reset_workflow_execution(ResetWorkflowExecutionRequest(
        namespace=client.namespace,
        workflow_execution=WorkflowExecution(workflow_id=report.workflow_id, run_id=report.run_id or ""),
        reason=f"{identity}: safe-replay verdict resume", workflow_task_finish_event_id=report.reset_event_id,
        request_id=claim_id(report), identity=identity))  # signals and updates after the point: re-applied
    return answer.run_id


def claim_id(report: ReplayReport) -> str:
    """The check's identity: ``resume-claim:<workflow id>:<run id>:<reset event id>``."""
    return f"resume-claim:{report.workflow_id}:{report.run_id}:{report.reset_event_id}"


async def _claim(client: Client, report: ReplayReport, identity: str) -> None:
    try:
        marker = await client.start_workflow(
            CLAIM_WORKFLOW_TYPE, id=claim_id(report), task_queue=CLAIM_TASK_QUEUE, memo={"identity": identity},
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE, id_conflict_policy=WorkflowIDConflictPolicy.FAIL)
    except WorkflowAlreadyStartedError as err:
        raise ResumeRefused(["this check was already resumed (by another operator or an earlier resume): "
                             "check the conversation again"]) from err
    await marker.terminate("claim recorded: this check is being resumed")
