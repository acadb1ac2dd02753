"""``peek_recorded_write``: the refund's first look at the ledger, which moves nothing.

A refund runs it as a local activity and runs ``find_recorded_write`` (an activity that may
move the money an applied write still owes) only when it answers True; so it must answer True
for every key ``find_recorded_write`` has anything to say about: a recorded write, and a key
holding another call (which ``find_recorded_write`` refuses). Real retail system of record
(SQLite), activities run in Temporal's ``ActivityEnvironment``.
"""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.retail_port import RetailPort
from activities.tools import ToolActivities
from tests.policy_fixtures import PENDING
from workflows.domain.actions import make_tool_call
from workflows.domain.contracts import WriteToolRequest
from starter.runtime.worker import build_backend


def _write(reason: str, key: str = f"cancel_pending_order:{PENDING}:c-peek.t2") -> WriteToolRequest:
    return WriteToolRequest(store="main", idempotency_key=key,
                            call=make_tool_call("cancel_pending_order", {"order_id": PENDING, "reason": reason}))


async def test_an_unused_key_is_unused_and_a_written_one_is_used(settings):
    backend = build_backend(settings)
    port = RetailPort(backend)
    tools = ToolActivities(tools=port, outbox=port, tickets=port)
    env = ActivityEnvironment()
    write = _write("no longer needed")
    assert await env.run(tools.peek_recorded_write, write) is False
    assert await env.run(tools.find_recorded_write, write) is None
    assert (await env.run(tools.run_write_tool, write)).ok
    assert await env.run(tools.peek_recorded_write, write) is True
    assert (await env.run(tools.find_recorded_write, write)).replayed
    assert len(backend.ledger_entries("main")) == 1  # the look-ups wrote nothing


async def test_a_key_holding_another_call_is_used_so_the_activity_refuses_it(settings):
    backend = build_backend(settings)
    port = RetailPort(backend)
    tools = ToolActivities(tools=port, outbox=port, tickets=port)
    env = ActivityEnvironment()
    assert (await env.run(tools.run_write_tool, _write("no longer needed"))).ok
    other = _write("ordered by mistake")
    assert await env.run(tools.peek_recorded_write, other) is True
    with pytest.raises(ApplicationError) as refused:
        await env.run(tools.find_recorded_write, other)
    assert refused.value.non_retryable and refused.value.type == "IdempotencyKeyConflict"
