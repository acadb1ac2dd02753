"""``statekeeper resume``: reset a conversation's run to its last completed workflow task,
only on a ``resume`` verdict of ``starter.ops.replay_check.check``.

A check is resumed at most once, even by two operators at the same moment: Temporal neither
deduplicates resets by request id nor refuses to reset a run that another reset has just
replaced. So ``resume`` holds a claim while it resets: a marker workflow whose id is the
check's (the conversation, its run, the reset point), running from before the check is read
again until the reset has answered. Temporal refuses to start a second run of an id while one
runs, so one resume holds the claim; the other is refused, and any resume that gets the claim
later reads the run again first, so it sees a reset that happened meanwhile and refuses. A
reset that failed (Temporal refused it, or did not answer) releases the claim, so the check
can be resumed again; a claim left by a process that died times out after
``CLAIM_SECONDS``. The closed markers stay in the namespace's history as the record of who
resumed (``identity``, in the memo).
"""

from __future__ import annotations

from contextlib import suppress
from datetime import timedelta

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from starter.ops.replay_check import ReplayReport

CLAIM_WORKFLOW_TYPE = "ResumeClaim"
"""The marker's workflow type: no worker runs it (it is terminated once the reset answered)."""
CLAIM_TASK_QUEUE = "statekeeper-resume-claims"
"""A queue no worker polls, so the marker never gets a workflow task."""
CLAIM_SECONDS = 30.0
"""How long a claim holds when its holder dies before releasing it (the marker's execution
timeout); a reset answers in milliseconds."""


class ResumeRefused(Exception):
    """``resume`` on a ``refuse`` verdict: nothing was changed; ``reasons`` say why."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


async def resume(client: Client, report: ReplayReport, identity: str = "statekeeper resume") -> str:
    """Reset the report's run to its last completed workflow task (``reset_event_id``);
    returns the new run's id. Raises ``ResumeRefused`` unless the verdict is ``resume``, when
    the conversation has another run since the check or its run has more events than the
    check read, or while another resume holds the check (nothing is changed then);
    ``RPCError`` when Temporal refuses the reset or does not answer (the claim is released:
    check again)."""
    if report.verdict != "resume" or report.reset_event_id is None:
        raise ResumeRefused(report.reasons)
    await _unchanged(client, report)
    marker = await _claim(client, report, identity)
    try:
        await _unchanged(client, report)  # again, holding the claim: a resume that held it before may have reset
        answer = await client.workflow_service.reset_workflow_execution(ResetWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=report.workflow_id, run_id=report.run_id or ""),
            reason=f"{identity}: safe-replay verdict resume", workflow_task_finish_event_id=report.reset_event_id,
            request_id=claim_id(report), identity=identity))  # signals and updates after the point: re-applied
    finally:
        with suppress(RPCError):  # timed out already: released all the same
            await marker.terminate("claim released")
    return answer.run_id


async def _unchanged(client: Client, report: ReplayReport) -> None:
    """Raises ``ResumeRefused`` unless the conversation's current run is the checked one,
    with the history length the check read (a reset ends the run: both change)."""
    described = await client.get_workflow_handle(report.workflow_id).describe()
    if described.run_id != report.run_id:  # e.g. another operator's resume: check the new run first
        raise ResumeRefused([f"the conversation has another run since the check ({described.run_id}): "
                             "check it again"])
    if report.history_length is not None and described.history_length != report.history_length:
        # e.g. a send without keys started after the check: a reset would run it again while
        # the first attempt may still land (the check would have said unproven)
        raise ResumeRefused([f"the run has moved on since the check ({report.history_length} events, now "
                             f"{described.history_length}): check it again"])


def claim_id(report: ReplayReport) -> str:
    """The check's identity: ``resume-claim:<workflow id>:<run id>:<reset event id>``."""
    return f"resume-claim:{report.workflow_id}:{report.run_id}:{report.reset_event_id}"


async def _claim(client: Client, report: ReplayReport, identity: str) -> WorkflowHandle:
    """Start the check's marker (running until released); raises ``ResumeRefused`` while
    another resume holds it."""
    try:
        return await client.start_workflow(
            CLAIM_WORKFLOW_TYPE, id=claim_id(report), task_queue=CLAIM_TASK_QUEUE, memo={"identity": identity},
            execution_timeout=timedelta(seconds=CLAIM_SECONDS),
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE, id_conflict_policy=WorkflowIDConflictPolicy.FAIL)
    except WorkflowAlreadyStartedError as err:
        raise ResumeRefused(["this check is being resumed by another operator right now: check the conversation "
                             "again in a moment"]) from err
