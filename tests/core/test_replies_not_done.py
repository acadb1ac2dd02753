"""A request that was not carried out is told with its detail quoted as what the user asked
for. A detail is worded as the change it makes, so unquoted "A supervisor did not approve your
request, so nothing was changed: Cancel order #W1068289 (reason: ordered by mistake). The full
amount of 3453.28 is refunded to the original payment method." would read as if the refund had
been made (a rejected approval, through the API)."""

from __future__ import annotations

import pytest

from workflows.conversation import cancellation

from workflows.domain import replies
from workflows.domain.records import Step
from workflows.domain.state import ConversationState, StepStatus

DETAIL = ("Cancel order #W1068289 (reason: ordered by mistake). The full amount of 3453.28 is refunded to the "
          "original payment method.")


@pytest.mark.parametrize("told", [
    replies.approval_rejected(DETAIL),
    replies.approval_expired(DETAIL),
    replies.approved(DETAIL, "order #W1068289 is 'cancelled'"),
    replies.resolved(DETAIL, applied=False),
], ids=["rejected", "expired", "approved-but-refused", "resolved-not-applied"])
def test_what_was_not_done_is_quoted_as_the_request(told):
    assert f'Your request was: "{DETAIL}"' in told, told
    outside = told.replace(f'"{DETAIL}"', "")
    assert "refunded" not in outside and ": Cancel" not in outside, told


def test_what_was_done_is_still_said_as_done():
    assert replies.approved(DETAIL, None) == f"A supervisor approved your request, and it is done: {DETAIL}"
    assert replies.resolved(DETAIL, applied=True).startswith(f"A colleague checked your request, and it went through: {DETAIL}")


def _state_with(*steps: "tuple[str, StepStatus]") -> ConversationState:
    return ConversationState(conversation_id="c", steps=[
        Step(step_id=f"c.t{i}", name="cancel_pending_order", status=status, turn=i, detail=detail)
        for i, (detail, status) in enumerate(steps, start=1)])


@pytest.mark.parametrize("status, label", [
    (StepStatus.CANCELLED, "Not done"),
    (StepStatus.FAILED, "Did not go through"),
    (StepStatus.UNKNOWN, "Not known whether it went through (a human agent is checking)"),
])
def test_a_cancel_summary_quotes_what_was_not_done(status, label):
    """A conversation cancelled while a cancel awaited its yes quotes it as not done, never
    "The conversation was cancelled. Not done: Cancel order #W4566809 (...). The full amount
    of 826.70 is refunded to the original payment method." unquoted."""
    told = cancellation.summary(_state_with((DETAIL, status)), [])
    assert told == f'{replies.CANCELLED} {label}: "{DETAIL}"', told


def test_a_cancel_summary_still_says_what_was_done_as_done():
    told = cancellation.summary(_state_with((DETAIL, StepStatus.DONE), ("Change the address", StepStatus.CANCELLED)), [])
    assert told == f'{replies.CANCELLED} Done: {DETAIL} Not done: "Change the address"', told


def test_the_budget_hand_off_quotes_what_did_not_go_through():
    told = replies.budget_exceeded([], [DETAIL])
    assert told.startswith(f'Your request did not go through: "{DETAIL}" '), told


def test_a_request_proposed_again_is_not_done_once():
    """The same cancel declined twice and a third awaiting approval: the summary says "Not
    done: <detail>" once, not "Not done: <detail>; <detail>; <detail>"."""
    told = cancellation.summary(_state_with(*[(DETAIL, StepStatus.CANCELLED)] * 3), [])
    assert told == f'{replies.CANCELLED} Not done: "{DETAIL}"', told
