"""An operator's resolution of an unknown outcome, as pure functions (``workflows.conversation.resolution``):
which steps it may resolve, what it changes, and the refusals' words."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from pydantic import ValidationError
from temporalio.exceptions import ApplicationError

from tests.policy_fixtures import authenticated
from workflows.domain import transitions as tr
from workflows.domain.records import ConversationStatus, StepStatus
from workflows.conversation.resolution import ResolveOutcome, apply_resolution, check_resolution, unresolved

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


def _escalated(*unknown: str):
    state = authenticated()
    for i, step_id in enumerate(unknown):
        tr.start_step(state, step_id, "cancel_pending_order", f"Cancel order #{i}.", operation_id=step_id)
        tr.finish_step(state, step_id, StepStatus.UNKNOWN, "could not be shown to have completed")
    tr.start_step(state, "c.t9", "modify_pending_order_address", "Ship elsewhere.", operation_id="c.t9")
    tr.finish_step(state, "c.t9", StepStatus.DONE)
    tr.close(state, ConversationStatus.ESCALATED, "escalated")
    return state


def _request(step_id: str, outcome: str = "applied", operator: str = "op-1") -> ResolveOutcome:
    return ResolveOutcome(step_id=step_id, outcome=outcome, operator=operator, note="checked the dashboard")


def _refusal(state, request) -> str:
    with pytest.raises(ApplicationError) as err:
        check_resolution(state, request)
    assert err.value.type == "ResolutionRefused" and err.value.non_retryable
    return err.value.message


def test_applied_marks_the_step_done_records_who_and_reopens_the_conversation():
    state = _escalated("c.t2")
    step = check_resolution(state, _request("c.t2"))
    record = apply_resolution(state, step, _request("c.t2"), NOW)
    assert step.status is StepStatus.DONE and step.error is None
    assert state.status is ConversationStatus.ACTIVE and state.ended_reason is None
    assert state.resolutions == [record] and (record.operator, record.resolved_at) == ("op-1", NOW)
    assert record.told.startswith("A colleague checked your request, and it went through: Cancel order #0.")


def test_not_applied_fails_the_step_with_the_operators_note():
    state = _escalated("c.t2")
    record = apply_resolution(state, check_resolution(state, _request("c.t2", "not_applied")),
                              _request("c.t2", "not_applied"), NOW)
    step = state.steps[0]
    assert step.status is StepStatus.FAILED and step.error == "not applied, checked by operator op-1: checked the dashboard"
    assert "did not go through; nothing was changed" in record.told


def test_the_conversation_stays_escalated_while_another_unknown_step_is_left():
    state = _escalated("c.t2", "c.t4")
    apply_resolution(state, check_resolution(state, _request("c.t2")), _request("c.t2"), NOW)
    assert state.status is ConversationStatus.ESCALATED and [s.step_id for s in unresolved(state)] == ["c.t4"]


def test_refusals_name_the_reason_and_change_nothing():
    state = _escalated("c.t2")
    assert _refusal(state, _request("nope")) == "this conversation has no step nope"
    assert _refusal(state, _request("c.t9")) == ("step c.t9 is done, not unknown: only an unknown outcome can "
                                                 "be resolved")
    before = state.model_copy(deep=True)
    assert state == before
    apply_resolution(state, check_resolution(state, _request("c.t2")), _request("c.t2"), NOW)
    assert _refusal(state, _request("c.t2", "not_applied", "op-2")) == "step c.t2 was already resolved as applied by op-1"


@pytest.mark.parametrize("fields", [{"outcome": "maybe"}, {"operator": "two words"}, {"note": ""},
                                    {"step_id": ""}])
def test_a_malformed_resolution_is_refused_by_its_model(fields):
    with pytest.raises(ValidationError):
        ResolveOutcome(**{"step_id": "c.t2", "outcome": "applied", "operator": "op-1", "note": "n", **fields})
