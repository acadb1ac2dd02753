"""A supervisor reads approvals over real HTTP: ``GET /approvals/{approval_id}`` and every item
of ``GET /approvals`` carry the write (tool, order, the exact detail the user confirmed, amount),
the reason in plain words, when it was requested and expires, and once decided who decided and
when; ``GET /refunds/{refund_id}`` carries the amount and a refused refund's reason.

The API served by uvicorn on a loopback port (``tests.api_stack.keyed_stack``, as ``statekeeper
dev`` serves it) with API keys of two tenants (``default``; ``acme`` with store ``acme-store``), a real worker
(the offline model) and a real Temporal dev server. A conversation's cancel of #W4566809
(826.70) and a standalone cancel of #W5918442 (1463.70) are above the 500.00 threshold. An
unknown approval id, and another tenant's, are the same 404. ``statekeeper approvals`` (a real
process on the same Temporal server) lists a pending approval with the same fields.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from datetime import datetime
from types import SimpleNamespace
from typing import AsyncIterator

import pytest

from activities.store.api_keys import Role
from tests.api_stack import keyed_stack, open_conversation
from tests.policy_fixtures import EMAIL, PENDING

BIG_ORDER = "#W5918442"  # sofia_rossi_8776, pending, 1463.70
FIELDS = {"approval_id", "process", "process_id", "status", "operation", "reason", "requested_at", "expires_at",
          "decided_by", "decided_at"}
THRESHOLD_REASON = "{amount} is above the approval threshold of 500.00."


@pytest.fixture(scope="module")
async def stack(temporal_env, tmp_path_factory) -> AsyncIterator[SimpleNamespace]:
    keys = {"svc": ("default", Role.SERVICE), "op": ("default", Role.OPERATOR), "acme_op": ("acme", Role.OPERATOR)}
    async with keyed_stack(temporal_env, tmp_path_factory.mktemp("approval-reads"), keys, stores=("s-big",),
                           store_tenants={"acme-store": "acme"}) as s:
        yield s


async def _eventually(check, seconds: float = 30.0):
    for _ in range(int(seconds / 0.2)):
        result = await check()
        if result:
            return result
        await asyncio.sleep(0.2)
    return None


async def _read(s, approval_id: str, who: str = "op") -> dict:
    response = await s.http.get(f"/approvals/{approval_id}", headers=s.headers[who])
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == FIELDS and set(body["operation"]) == {"tool", "order_id", "detail", "amount"}
    return body


async def _listed(s, approval_id: str) -> dict | None:
    response = await s.http.get("/approvals", params={"status": "pending", "limit": 100}, headers=s.headers["op"])
    assert response.status_code == 200, response.text
    return next((item for item in response.json()["items"] if item["approval_id"] == approval_id), None)


async def _not_found_alike(s, approval_id: str) -> None:
    """Another tenant's operator, and an id no process issued, get the same 404."""
    unknown = approval_id.rsplit("~", 1)[0] + "~" + "0" * 12
    for who, asked in (("acme_op", approval_id), ("op", unknown)):
        response = await s.http.get(f"/approvals/{asked}", headers=s.headers[who])
        assert response.status_code == 404, response.text
        assert response.json()["detail"] == f"approval {asked} does not exist"
    nobody = await s.http.get("/approvals/support-nobody-here~0123456789ab", headers=s.headers["op"])
    assert nobody.status_code == 404, nobody.text
    forbidden = await s.http.get(f"/approvals/{approval_id}", headers=s.headers["svc"])
    assert forbidden.status_code == 403  # reading approvals is for operators


def _seconds_between(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


async def test_a_conversation_approval_reads_the_detail_the_user_confirmed_pending_then_approved(stack):
    s = stack
    cid, say = await open_conversation(s, f"Hi, my email is {EMAIL}")

    shown = await say(f"Please cancel order {PENDING}, I ordered it by mistake")
    confirmed_detail = shown["awaiting_confirmation"]
    assert confirmed_detail and PENDING in confirmed_detail
    approval_id = (await say("yes"))["awaiting_approval"]
    assert approval_id

    pending = await _read(s, approval_id)
    assert pending["process"] == "conversation" and pending["process_id"] == cid
    assert pending["status"] == "pending" and pending["decided_by"] is None and pending["decided_at"] is None
    assert pending["operation"] == {"tool": "cancel_pending_order", "order_id": PENDING,
                                    "detail": confirmed_detail, "amount": "826.70"}
    assert pending["reason"] == THRESHOLD_REASON.format(amount="826.70")  # plain words: no "[approval-threshold]"
    assert _seconds_between(pending["requested_at"], pending["expires_at"]) == 86400  # the default timeout
    # the list carries the same, once visibility shows the PendingApproval
    assert await _eventually(lambda: _listed(s, approval_id)) == pending
    await _not_found_alike(s, approval_id)

    decided = await s.http.post(f"/approvals/{approval_id}", json={"decision": "approve", "approver": "sup-ana"},
                                headers=s.headers["op"])
    assert decided.status_code == 200, decided.text
    approved = await _read(s, approval_id)
    assert approved["status"] == "approved" and approved["decided_by"] == "sup-ana"
    assert approved["decided_at"] is not None and approved["decided_at"] >= pending["requested_at"]
    assert approved["operation"] == pending["operation"]  # the detail stays once the write left the waiting list
    assert {k: approved[k] for k in ("reason", "requested_at", "expires_at")} == \
        {k: pending[k] for k in ("reason", "requested_at", "expires_at")}
    assert await _eventually(lambda: _gone(s, approval_id))


async def _cli_lists(s, approval_id: str) -> dict:
    """The item ``statekeeper approvals --json`` lists for ``approval_id`` (it prints a table
    without ``--json``, with the same values)."""
    env = {**os.environ, "STATEKEEPER_TEMPORAL_ADDRESS": s.address, "STATEKEEPER_TASK_QUEUE": s.settings.task_queue,
           "STATEKEEPER_DATA_DIR": str(s.settings.data_dir), "STATEKEEPER_DEV_STATE_FILE": str(s.settings.data_dir / "dev.json")}

    def run(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "starter.cli.app", "approvals", *args], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    listed = json.loads(await asyncio.to_thread(run, "--json"))
    table = " ".join((await asyncio.to_thread(run)).split())
    assert approval_id.rsplit("~", 1)[1] in table and "awaiting a decision" in table
    return next(item for item in listed if item["approval_id"] == approval_id)


async def _gone(s, approval_id: str) -> bool:
    return await _listed(s, approval_id) is None


async def test_a_standalone_refund_approval_reads_its_own_detail_pending_then_rejected(stack):
    s = stack
    body = {"request_id": f"reads-{uuid.uuid4().hex[:8]}", "order_id": BIG_ORDER, "operation": "cancel",
            "reason": "no longer needed", "store": "s-big"}
    started = await s.http.post("/refunds", json=body, headers=s.headers["svc"])
    assert started.status_code == 202, started.text
    refund_id = started.json()["refund_id"]

    async def refund(wanted: set[str]) -> dict | None:
        status = (await s.http.get(f"/refunds/{refund_id}", headers=s.headers["svc"])).json()
        return status if status["status"] in wanted else None

    waiting = await _eventually(lambda: refund({"awaiting_approval"}))
    assert waiting and waiting["amount"] == "1463.70" and waiting["reason"] is None
    approval_id = waiting["pending_approval"]

    pending = await _read(s, approval_id)
    assert pending["process"] == "refund" and pending["process_id"] == refund_id and pending["status"] == "pending"
    # the sentence a conversation would have shown for this cancel, from the refund's fresh reads
    assert pending["operation"] == {
        "tool": "cancel_pending_order", "order_id": BIG_ORDER, "amount": "1463.70",
        "detail": f"Cancel order {BIG_ORDER} (reason: no longer needed). The full amount of 1463.70 is refunded to "
                  "the original payment method."}
    assert pending["reason"] == THRESHOLD_REASON.format(amount="1463.70")
    assert pending["decided_by"] is None and pending["decided_at"] is None
    assert await _eventually(lambda: _listed(s, approval_id)) == pending
    await _not_found_alike(s, approval_id)
    assert await _cli_lists(s, approval_id) == pending

    decided = await s.http.post(f"/approvals/{approval_id}", headers=s.headers["op"],
                                json={"decision": "reject", "approver": "sup-bo", "note": "too much"})
    assert decided.status_code == 200, decided.text
    refused = await _eventually(lambda: refund({"refused"}))
    assert refused and refused["reason"] == "rejected by sup-bo" and refused["amount"] == "1463.70"
    rejected = await _read(s, approval_id)  # the finished refund still answers
    assert rejected["status"] == "rejected" and rejected["decided_by"] == "sup-bo" and rejected["decided_at"]
    assert rejected["operation"] == pending["operation"] and rejected["reason"] == pending["reason"]
    assert await _eventually(lambda: _gone(s, approval_id))
