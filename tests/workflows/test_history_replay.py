"""Versioned workflow code: the recorded histories of every release kept in
``tests/histories/<version>/`` (made by ``python -m tests.histories.record --out ...``) replay
with today's workflow code in the ``Replayer``, with the worker's own sandbox runner. A
change to the command sequence that is not guarded by ``workflow.patched`` fails here, in
CI, instead of failing running conversations with a nondeterminism error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner
from temporalio.workflow import NondeterminismError

from starter.runtime.connection import data_converter
from starter.runtime.worker import workflow_runner
from workflows.refund.workflow import RefundWorkflow
from workflows.conversation.workflow import SupportWorkflow

HISTORIES = Path(__file__).resolve().parent.parent / "histories"
RECORDED = sorted(p for p in HISTORIES.glob("v*/*.json") if p.name != "workflow_ids.json")


def _version(release: str) -> tuple[int, ...]:
    """``vX.Y.Z`` as (X, Y, Z)."""
    return tuple(int(part) for part in release.removeprefix("v").split("."))


RELEASES = sorted({p.parent.name for p in RECORDED}, key=_version)
LAST_RELEASE = RELEASES[-1]
"""The release whose recordings changes are guarded against (and the unguarded edits below
replayed against): the newest folder of ``tests/histories``."""


def load(path: Path) -> WorkflowHistory:
    """The history at ``path`` under its real workflow id (ids derived from it, such as
    approval ids, must come out the same)."""
    workflow_ids = json.loads((path.parent / "workflow_ids.json").read_text())
    return WorkflowHistory.from_json(workflow_ids[path.name], path.read_text())


def test_every_release_has_recorded_histories_of_both_workflows():
    assert RELEASES and all(_version(release) >= (1, 0, 0) for release in RELEASES)  # no 0.x run is replayed
    for release in RELEASES:
        names = [path.name for path in RECORDED if path.parent.name == release]
        assert any("-support-" in n for n in names) and any("-refund-" in n for n in names), release


def replayer() -> Replayer:
    return Replayer(workflows=[SupportWorkflow, RefundWorkflow], data_converter=data_converter(),
                    workflow_runner=workflow_runner())


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: f"{p.parent.name}/{p.stem}")
async def test_recorded_history_replays_with_todays_code(path: Path):
    result = await replayer().replay_workflow(load(path), raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"


# Three ordinary edits to the command sequence, made here without a `workflow.patched` guard:
# replaying the last release's histories must catch each of them.

def _child_id_in_a_new_format(monkeypatch):
    from workflows.domain import keys
    original = keys.refund_workflow_id
    monkeypatch.setattr(keys, "refund_workflow_id", lambda *args: original(*args) + "-v2")


def _no_balance_re_read_after_a_refund(monkeypatch):
    from workflows.conversation import execute

    async def skip(state, cancel_requested=None):
        return None
    monkeypatch.setattr(execute, "_refresh_customer", skip)


def _search_attributes_upserted_at_other_times(monkeypatch):
    from workflows.visibility import Visibility
    monkeypatch.setattr(Visibility, "publish", lambda self, state, activity=None: None)


@pytest.mark.parametrize("edit", [_child_id_in_a_new_format, _no_balance_re_read_after_a_refund,
                                  _search_attributes_upserted_at_other_times], ids=lambda f: f.__name__.strip("_"))
async def test_an_unguarded_change_to_the_command_sequence_fails_replay(edit, monkeypatch):
    assert await _unsandboxed_replay_failure() is None  # the control: unedited, it replays
    edit(monkeypatch)
    assert isinstance(await _unsandboxed_replay_failure(), NondeterminismError)


async def _unsandboxed_replay_failure():
    history = load(HISTORIES / LAST_RELEASE / "returns_and_cancels-support-v-return-cancel-run0.json")
    # unsandboxed: the sandbox would re-import the edited modules fresh and undo the edit
    replay = Replayer(workflows=[SupportWorkflow, RefundWorkflow], data_converter=data_converter(),
                      workflow_runner=UnsandboxedWorkflowRunner())
    return (await replay.replay_workflow(history, raise_on_replay_failure=False)).replay_failure
