"""``starter.client.transient.transient_retried``: a call refused as unavailable, timed out or with an
unknown outcome is sent again (the τ-bench runner's messages carry ids of their own, so a resend
is handled once); a definite refusal is raised at once, and the last transient one after the
attempts run out."""

from __future__ import annotations

import pytest

from starter.client.errors import ConversationError
from starter.client.transient import transient_retried


def _script(*outcomes):
    calls = []

    async def call():
        calls.append(1)
        outcome = outcomes[len(calls) - 1]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome
    return call, calls


@pytest.mark.parametrize("kind", ["unavailable", "timeout", "outcome_unknown"])
async def test_a_transient_refusal_is_sent_again(kind):
    call, calls = _script(ConversationError("Temporal is not reachable; retry later", kind), "reply")
    assert await transient_retried(call, pause_seconds=0) == "reply" and len(calls) == 2


async def test_a_definite_refusal_is_raised_at_once():
    call, calls = _script(ConversationError("conversation c has finished", "finished"), "reply")
    with pytest.raises(ConversationError) as err:
        await transient_retried(call, pause_seconds=0)
    assert err.value.kind == "finished" and len(calls) == 1


async def test_the_last_transient_refusal_is_raised_when_the_attempts_run_out():
    call, calls = _script(*[ConversationError(f"try {i}", "unavailable") for i in range(3)])
    with pytest.raises(ConversationError) as err:
        await transient_retried(call, attempts=3, pause_seconds=0)
    assert str(err.value) == "try 2" and len(calls) == 3
