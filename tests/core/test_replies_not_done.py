"""A request that was not carried out is told with its detail quoted as what the user asked
for. A detail is worded as the change it makes, so "A supervisor did not approve your request,
so nothing was changed: Cancel order #W1068289 (reason: ordered by mistake). The full amount of
3453.28 is refunded to the original payment method." read as if the refund had been made (seen
by a new user rejecting an approval through the API)."""

from __future__ import annotations

import pytest

from workflows import replies

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
