"""The journal's activity call is guarded by ``workflow.patched("journal-v1")``: the released
v0.1.0 histories (which made no such call) replay with it (tests/workflows/test_history_replay.py
replays them all), and the same change without its guard fails their replay."""

from __future__ import annotations

from temporalio.worker import Replayer, UnsandboxedWorkflowRunner
from temporalio.workflow import NondeterminismError

from starter.runtime.connection import data_converter
from tests.workflows.test_history_replay import HISTORIES, load
from workflows.conversation import journal as journal_log
from workflows.refund.workflow import RefundWorkflow
from workflows.conversation.workflow import SupportWorkflow


async def _replay_failure(name: str):
    # unsandboxed: the sandbox would re-import journal_log fresh and undo the edit
    replay = Replayer(workflows=[SupportWorkflow, RefundWorkflow], data_converter=data_converter(),
                      workflow_runner=UnsandboxedWorkflowRunner())
    return (await replay.replay_workflow(load(HISTORIES / "v0.1.0" / name), raise_on_replay_failure=False)
            ).replay_failure


async def test_the_unguarded_journal_call_fails_replay_of_released_histories(monkeypatch):
    names = ["returns_and_cancels-support-v-return-cancel-run0.json", "approval-support-v-approval-run0.json",
             "continue_as_new-support-v-can-run1.json"]
    for name in names:
        assert await _replay_failure(name) is None, name  # guarded: it replays
    monkeypatch.setattr(journal_log, "journal_patched", lambda: True)
    for name in names:
        assert isinstance(await _replay_failure(name), NondeterminismError), name
