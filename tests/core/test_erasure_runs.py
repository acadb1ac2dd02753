"""``TemporalRuns.of_customer`` against visibility that lags behind a continue-as-new, with a
stand-in for the Temporal client (the lag cannot be produced on demand on a real server).

Right after a conversation continues as new, visibility may still list the run it left as
running and not list the new run at all. Erasure described the listed run (closed: continued
as new), so it found nothing running: it neither refused nor stopped the conversation, whose
new run went on writing the customer's records after the erasure reported success.
"""

from __future__ import annotations

from types import SimpleNamespace

from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from activities.erasure.runs import SUPPORT, TemporalRuns

RUNNING, CONTINUED = WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW


class LaggingVisibility:
    """Lists ``support-c``'s old run ``r1`` as running; the server knows ``r1`` continued as
    new into ``r2``, which is running and not listed yet."""

    runs = {"r1": CONTINUED, "r2": RUNNING}
    latest = "r2"

    async def _listed(self):
        yield SimpleNamespace(id="support-c", run_id="r1", workflow_type=SUPPORT, status=RUNNING, parent_id=None)

    def list_workflows(self, query: str):
        return self._listed()

    def get_workflow_handle(self, workflow_id: str, run_id: str | None = None):
        async def describe():
            if workflow_id != "support-c":
                raise RPCError("not found", RPCStatusCode.NOT_FOUND, b"")
            run = run_id or self.latest
            return SimpleNamespace(run_id=run, workflow_type=SUPPORT, status=self.runs[run], parent_id=None)

        return SimpleNamespace(describe=describe)


async def test_the_run_a_conversation_has_just_continued_into_is_found_running():
    runs = await TemporalRuns(LaggingVisibility()).of_customer(["cust-0123456789abcdef0123"], ["c"])
    assert {(r.run_id, r.running) for r in runs} == {("r1", False), ("r2", True)}
