"""``ClientCore.run_update`` tells an update whose landing is unclear from one that surely did
not land: with a caller-supplied id (a message, a supervisor's decision) an unreachable
Temporal is ``outcome_unknown`` naming how to send the same update again; without one it
stays ``unavailable``; a definite refusal passes through. Pure: the update's start is a
stand-in that fails as the SDK does."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.service import RPCError, RPCStatusCode

from starter.client.core import UNCLEAR_RPC, ClientCore
from starter.client.errors import ConversationError, message_outcome_unknown, outcome_unknown, status_for

DECISION = outcome_unknown("the decision", "send the same decision again (approve by alice)")


def _failing(status: RPCStatusCode):
    async def start(timeout: timedelta):
        raise RPCError("the server went away", status, b"")
    return start


@pytest.mark.parametrize("status", UNCLEAR_RPC)
@pytest.mark.parametrize("unknown", [DECISION, message_outcome_unknown("m-7")], ids=["decision", "message"])
async def test_an_unclear_failure_with_a_caller_id_is_outcome_unknown(status, unknown):
    with pytest.raises(ConversationError) as refused:
        await ClientCore(None, "q").run_update(_failing(status), "the update", unknown=unknown)
    assert refused.value is unknown and refused.value.kind == "outcome_unknown" and status_for(refused.value) == 503
    assert "whether" in str(refused.value) and "at most once" in str(refused.value)


async def test_the_retry_names_the_id_to_send_again():
    assert 'send it again with message_id "m-7"' in str(message_outcome_unknown("m-7"))
    assert message_outcome_unknown("m-7").message_id == "m-7"
    assert "send the same decision again (approve by alice)" in str(DECISION) and DECISION.message_id is None


async def test_without_a_caller_id_it_stays_unavailable():
    with pytest.raises(ConversationError) as refused:
        await ClientCore(None, "q").run_update(_failing(RPCStatusCode.UNAVAILABLE), "the update")
    assert refused.value.kind == "unavailable"


async def test_a_definite_refusal_passes_through():
    with pytest.raises(RPCError):
        await ClientCore(None, "q").run_update(_failing(RPCStatusCode.NOT_FOUND), "the update", unknown=DECISION)
