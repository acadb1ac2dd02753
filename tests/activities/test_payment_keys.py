"""The money of a write whose key is long, and a payments refusal after the order's write.

A write key holds the conversation id (up to 256 characters over HTTP, 992 bytes from the
Python client, percent-encoded on the wire when it is not ASCII); the payments service takes
an ``Idempotency-Key`` of at most 300 characters. Sent whole, a long key would be refused (422)
after the order's write had committed: the order cancelled, its money never moved, and the
refusal (``InvalidData``) telling the user "nothing was changed". So the key is hashed when
too long, and a refusal of the money after the write is an unknown outcome (escalated).

Real retail system of record (SQLite), real payments service over HTTP, the real adapters;
the activity runs in Temporal's ``ActivityEnvironment``.
"""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.payments_port import HttpPayments, payments_key, wire_key
from activities.ports import PortError
from activities.retail_port import RetailPort
from activities.tools import ToolActivities
from tests.policy_fixtures import PENDING
from tests.service_fixtures import services  # noqa: F401 - fixture
from tests.workflow_harness import order_details
from workflows.domain import keys
from workflows.domain.actions import make_tool_call
from workflows.domain.contracts import WriteToolRequest
from workflows.domain.errors import ErrorType


def _cancel(conversation_id: str) -> WriteToolRequest:
    call = make_tool_call("cancel_pending_order", {"order_id": PENDING, "reason": "no longer needed"})
    return WriteToolRequest(store="main", call=call, idempotency_key=keys.idempotency_key(call, f"{conversation_id}.t3"))


@pytest.mark.parametrize("conversation_id", ["c" * 300, "é" * 60])
async def test_a_long_write_keys_money_moves_once(services, settings, conversation_id):  # noqa: F811
    from starter.runtime.worker import build_backend

    backend = build_backend(settings)
    port, payments = RetailPort(backend), HttpPayments(services["payments"])
    tools = ToolActivities(tools=port, outbox=port, tickets=port, payments=payments)
    request = _cancel(conversation_id)
    assert len(wire_key(f"pay:{request.idempotency_key}")) > 300  # sent whole, the service refused it
    result = await ActivityEnvironment().run(tools.run_write_tool, request)
    assert result.ok and order_details(backend, PENDING)["status"] == "cancelled"
    again = await ActivityEnvironment().run(tools.run_write_tool, request)
    assert again.ok and again.replayed
    [operation] = payments.operations(PENDING)
    assert operation["idempotency_key"] == payments_key(request.idempotency_key)
    assert operation["idempotency_key"].startswith("pay:sha256:")
    assert payments_key("cancel_pending_order:#W1:desk-1.t3") == "pay:cancel_pending_order:#W1:desk-1.t3"


class RefusingPayments:
    """A payments system that refuses the data of every movement (as for a key too long)."""

    def move(self, key, reference, kind, movements):
        raise PortError(ErrorType.INVALID_DATA, "the payments system refused the data as invalid")


async def test_a_refused_money_movement_after_the_write_is_an_unknown_outcome(settings):
    from starter.runtime.worker import build_backend

    backend = build_backend(settings)
    port = RetailPort(backend)
    tools = ToolActivities(tools=port, outbox=port, tickets=port, payments=RefusingPayments())
    with pytest.raises(ApplicationError) as failed:
        await ActivityEnvironment().run(tools.run_write_tool, _cancel("desk-9"))
    # the order's write committed: not InvalidData ("nothing was changed"), which the workflow
    # reports as a refusal; an unknown outcome, which it escalates to a human
    assert failed.value.type == ErrorType.OUTCOME_UNKNOWN.value and failed.value.non_retryable
    assert order_details(backend, PENDING)["status"] == "cancelled"
