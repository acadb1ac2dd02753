"""An operator's resolution is checked against the systems of record before it is sent
(``starter.ops.resolution_evidence``): real Temporal server and worker, the retail system and
the payments, email and ticketing services over HTTP (SQLite files). The payments service is
held on a slow lock and then stopped while the customer's cancel runs, so the cancel is in
the retail ledger but no money moved, and the step's outcome is unknown.
"""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest

from starter.client.conversations import ConversationError
from starter.ops.replay_systems import Systems
from starter.ops.resolution_evidence import LedgerEvidence
from systems.fleet import SERVICES, Fleet, sqlite_databases
from systems.service_kit.server import ServiceThread
from tests.policy_fixtures import EMAIL, PENDING
from tests.service_fixtures import arm
from tests.workflow_harness import ListBrain, reply, running_worker
from workflows.domain.keys import refund_workflow_id
from tests.workflows.test_unknown_outcomes import CANCEL_BRAIN


async def test_a_refund_that_never_moved_is_not_resolved_as_applied(temporal_env, settings, tmp_path):
    fleet = Fleet(sqlite_databases(tmp_path))
    urls = fleet.start()
    try:
        arm(urls["payments"], "slow_lock", seconds=30.0)
        fast = settings.model_copy(update={"write_timeout_seconds": 3.0})
        brain = ListBrain(CANCEL_BRAIN + [reply("ok"), reply("ok")])
        async with running_worker(temporal_env, fast, brain=brain, services=urls) as (client, backend):
            cid = f"unmoved-{uuid.uuid4().hex[:6]}"
            await client.start_conversation(cid)
            await client.send_message(cid, f"my email is {EMAIL}, cancel {PENDING}")
            yes = asyncio.create_task(client.send_message(cid, "yes"))
            while httpx.get(f"{urls['payments']}/_faults").json().get("slow_lock") != 1:
                await asyncio.sleep(0.05)
            port = fleet.threads["payments"].port
            await asyncio.to_thread(fleet.threads["payments"].stop)  # the money's fate: unknown
            assert (await asyncio.wait_for(yes, 120)).status == "escalated"
            fleet.apps["payments"].state.effects.engine.dispose()
            fleet.apps["payments"] = SERVICES["payments"](fleet.databases["payments"])
            fleet.threads["payments"] = ServiceThread(fleet.apps["payments"], port=port).start()
            assert httpx.get(f"{urls['payments']}/operations", params={"reference": PENDING}).json() == []
            assert [e["tool"] for e in backend.ledger_entries("main")] == ["cancel_pending_order"]
            [step] = [s for s in (await client.state(cid)).steps if s.status.value == "unknown"]
            # its refund run failed: said with why and who has the case (it was "failed", reason
            # null, read as nothing done while its retail write had applied)
            refund = await client.refund(refund_workflow_id("main", PENDING, step.operation_id))
            assert refund.status == "failed" and refund.reason.startswith("its run failed: ")
            assert refund.reason.endswith(f"its conversation {cid} has the case: see its state")

            with_services = fast.model_copy(update={f"{n}_url": u for n, u in urls.items()})
            client.evidence = LedgerEvidence(lambda: Systems.from_settings(with_services))
            for outcome, words in (("applied", "the money has not moved"),
                                   ("not_applied", "cannot be resolved as applied either")):
                with pytest.raises(ConversationError) as refused:
                    await client.resolve_outcome(cid, step.step_id, outcome, "op-1", "checked the order")
                assert refused.value.kind == "resolution_refused" and words in str(refused.value)
                # not_applied's refusal said "resolve it as applied", which the other refuses here
                assert "resolve it as applied" not in str(refused.value)

            def unopenable() -> Systems:
                raise ConnectionError("the database is down")
            client.evidence = LedgerEvidence(unopenable)
            with pytest.raises(ConversationError) as blind:
                await client.resolve_outcome(cid, step.step_id, "not_applied", "op-1", "checked")
            assert "cannot be opened (a connection failed)" in str(blind.value)
            state = await client.state(cid)
            assert state.status.value == "escalated" and state.resolutions == []
            assert httpx.get(f"{urls['payments']}/operations", params={"reference": PENDING}).json() == []
    finally:
        fleet.stop()
