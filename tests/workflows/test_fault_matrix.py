"""Each fault kind × each tool class, end to end: a read, a reversible write (an address
change) and an irreversible write that moves money (a cancel: the retail write, then the
payments service) each meet one fault, and the conversation still ends with the effect
exactly once, reported as it is.

Faults in the retail system come through its port (``tests.port_faults``: the same kinds as
the services'); faults in the payments service through its control endpoint. Real Temporal
dev server and worker, retail SQLite, payments/email/ticketing over HTTP.
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.policy_fixtures import CUSTOMER, EMAIL, PENDING
from tests.port_faults import FaultyPort
from tests.service_fixtures import arm, services  # noqa: F401 - fixture
from tests.workflow_harness import ListBrain, call, order_details, running_worker

FAULTS = ("http_5xx", "fail_before_commit", "commit_then_drop", "answer_after_timeout", "slow_lock")
LOOKUPS = [call("find_user_id_by_email", email=EMAIL), call("get_user_details", user_id=CUSTOMER)]
ADDRESS = dict(address1="1 Main St", address2="", city="Austin", state="TX", country="USA", zip="78701")


@pytest.fixture
def fast_writes(settings):
    return settings.model_copy(update={"write_timeout_seconds": 3.0})


@pytest.mark.parametrize("fault", FAULTS)
async def test_a_read_meets_a_fault_and_still_answers(temporal_env, fast_writes, services, fault):  # noqa: F811
    port = FaultyPort()
    port.arm("get_order_details", fault)
    brain = ListBrain([*LOOKUPS, call("get_order_details", order_id=PENDING), {"kind": "reply", "text": "found"}])
    async with running_worker(temporal_env, fast_writes, brain=brain, slow_reads=port,
                              services=services) as (client, _backend):
        cid = await client.start_conversation(f"fm-read-{fault}-{uuid.uuid4().hex[:6]}")
        reply = await client.send_message(cid, f"my email is {EMAIL}, where is {PENDING}")
        assert reply.text == "found"
        assert PENDING in (await client.state(cid)).orders
    assert port.hits == [("get_order_details", fault)]


@pytest.mark.parametrize("fault", FAULTS)
async def test_a_reversible_write_meets_a_fault_and_applies_once(temporal_env, fast_writes, services,  # noqa: F811
                                                                 fault):
    port = FaultyPort()
    port.arm("modify_pending_order_address", fault)
    brain = ListBrain([*LOOKUPS, call("get_order_details", order_id=PENDING),
                       call("modify_pending_order_address", order_id=PENDING, **ADDRESS)])
    async with running_worker(temporal_env, fast_writes, brain=brain, slow_reads=port,
                              services=services) as (client, backend):
        cid = await client.start_conversation(f"fm-rev-{fault}-{uuid.uuid4().hex[:6]}")
        assert (await client.send_message(cid, f"my email is {EMAIL}, new address for {PENDING}")).awaiting_confirmation
        done = await client.send_message(cid, "yes")
        assert done.status == "active"
        step = next(s for s in (await client.state(cid)).steps if s.name == "modify_pending_order_address")
        assert step.status.value == "done"
        assert order_details(backend, PENDING)["address"]["address1"] == "1 Main St"
        assert [e["ok"] for e in backend.ledger_entries("main")] == [True]
    assert port.hits == [("modify_pending_order_address", fault)]


@pytest.mark.parametrize("where", ["retail", "payments"])
@pytest.mark.parametrize("fault", FAULTS)
async def test_an_irreversible_write_meets_a_fault_and_moves_money_once(temporal_env, fast_writes,
                                                                        services, fault, where):  # noqa: F811
    port = FaultyPort()
    if where == "retail":
        port.arm("cancel_pending_order", fault)
    else:
        arm(services["payments"], fault)
    brain = ListBrain([*LOOKUPS, call("get_order_details", order_id=PENDING),
                       call("cancel_pending_order", order_id=PENDING, reason="no longer needed")])
    async with running_worker(temporal_env, fast_writes, brain=brain, slow_reads=port,
                              services=services) as (client, backend):
        cid = await client.start_conversation(f"fm-irr-{fault}-{uuid.uuid4().hex[:6]}")
        assert (await client.send_message(cid, f"my email is {EMAIL}, cancel {PENDING}")).awaiting_confirmation
        done = await client.send_message(cid, "yes")
        assert done.status == "active"
        step = next(s for s in (await client.state(cid)).steps if s.name == "cancel_pending_order")
        assert step.status.value == "done"
        order = order_details(backend, PENDING)
        assert order["status"] == "cancelled"
        assert [e["ok"] for e in backend.ledger_entries("main")] == [True]
    operations = httpx.get(f"{services['payments']}/operations", params={"reference": PENDING}).json()
    assert len(operations) == 1
    refunds = [m for m in order["payment_history"] if m["transaction_type"] == "refund"]
    assert [(m["payment_method_id"], f"{m['amount']:.2f}") for m in refunds] == \
        [(m["payment_method_id"], m["amount"]) for m in operations[0]["movements"]]
    assert httpx.get(f"{services['payments']}/_faults").json() == ({fault: 1} if where == "payments" else {})
