"""The journal's write is part of the command sequence: each turn's record goes out as a local
activity (one marker), and as an activity when that failed. The last release's histories
replay with it (tests/workflows/test_history_replay.py replays them all), and the same
write changed without a ``workflow.patched`` guard fails their replay: left out, or sent as
an activity where the history holds the local activity's marker."""

from __future__ import annotations

import pytest
from temporalio import workflow
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner
from temporalio.workflow import NondeterminismError

from starter.runtime.connection import data_converter
from tests.workflows.test_history_replay import HISTORIES, LAST_RELEASE, load
from workflows import options
from workflows.activity_api import JournalActivitiesApi
from workflows.conversation import journal as journal_log
from workflows.refund.workflow import RefundWorkflow
from workflows.conversation.workflow import SupportWorkflow

NAMES = ["returns_and_cancels-support-v-return-cancel-run0.json", "approval-support-v-approval-run0.json",
         "continue_as_new-support-v-can-run1.json"]


async def _replay_failure(name: str):
    # unsandboxed: the sandbox would re-import journal_log fresh and undo the edit
    replay = Replayer(workflows=[SupportWorkflow, RefundWorkflow], data_converter=data_converter(),
                      workflow_runner=UnsandboxedWorkflowRunner())
    return (await replay.replay_workflow(load(HISTORIES / LAST_RELEASE / name), raise_on_replay_failure=False)
            ).replay_failure


def _no_journal_write(monkeypatch):
    async def skip(self, record):
        return None
    monkeypatch.setattr(journal_log.JournalLog, "send", skip)


def _journal_write_as_an_activity(monkeypatch):
    async def as_activity(self, record):
        await workflow.execute_activity_method(
            JournalActivitiesApi.record_turn, record, start_to_close_timeout=options.JOURNAL_TIMEOUT,
            retry_policy=options.JOURNAL_RETRY, summary="journal")
    monkeypatch.setattr(journal_log.JournalLog, "send", as_activity)


@pytest.mark.parametrize("edit", [_no_journal_write, _journal_write_as_an_activity],
                         ids=lambda f: f.__name__.strip("_"))
async def test_an_unguarded_change_to_the_journal_write_fails_replay_of_the_released_histories(edit, monkeypatch):
    for name in NAMES:
        assert await _replay_failure(name) is None, name  # unedited: it replays
    edit(monkeypatch)
    for name in NAMES:
        assert isinstance(await _replay_failure(name), NondeterminismError), name
