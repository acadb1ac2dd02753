"""Every route of the HTTP API added for backend services, with its bad inputs, over real
HTTP semantics (httpx ASGI transport) against a real Temporal dev server, a real worker
and a SQLite system of record. Each refusal is checked together with the state it must
leave intact (the conversation's turn count, the ledger, the order, the runs started).
A cancel sent twice while a write runs keeps the first (202 both), a message after it is a
409, and a cancel once the conversation finished is a 409.

Deadlines, "no worker polling" and "Temporal down" are tests/e2e/test_api_deadlines.py.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import AsyncIterator

import httpx
import pytest
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from starter.api.application import create_app
from starter.client.conversations import StatekeeperClient
from tests.policy_fixtures import CARD, CUSTOMER, DELIVERED, EMAIL, PENDING
from tests.workflow_harness import order_details
from workflows.domain.actions import make_tool_call
from workflows.domain.contracts import RefundInput, SupportInput
from workflows.options import CUSTOMER_ID, ORDER_IDS, PENDING_APPROVAL, STATUS, STEP
from workflows.domain.pseudonym import customer_pseudonym
from workflows.domain.replies import refund_refused
from workflows.refund.workflow import RefundWorkflow
from workflows.conversation.workflow import SupportWorkflow

KEY = "test-pseudonym-key"
OTHER_CARD = "credit_card_9789590"  # ethan_lopez_6291's card, not Raj's


@pytest.fixture
async def stack(temporal_env, settings) -> AsyncIterator[tuple[httpx.AsyncClient, object, Client]]:
    """(http client, retail backend, temporal client) over a worker on the test's queue."""
    from starter.runtime.worker import build_backend, build_worker

    backend = build_backend(settings)
    client = StatekeeperClient(temporal_env.client, settings.task_queue, pseudonym_key=KEY)
    app = create_app(lambda: client)
    async with build_worker(temporal_env.client, settings, backend):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
                                     base_url="http://statekeeper.test", timeout=60.0) as http:
            yield http, backend, temporal_env.client


async def _runs(client: Client, workflow_id: str) -> int:
    return (await client.count_workflows(f'WorkflowId = "{workflow_id}"')).count


async def _eventually(check, seconds: float = 10.0):
    """Poll ``check()`` (visibility is eventually consistent) until it returns truthy."""
    result = None
    for _ in range(int(seconds / 0.2)):
        result = await check()
        if result:
            return result
        await asyncio.sleep(0.2)
    return result


async def test_start_with_text_twice_is_one_run_with_the_same_reply(stack):
    http, _, client = stack
    cid = f"first-{uuid.uuid4().hex[:8]}"
    body = {"conversation_id": cid, "text": f"Hi, my email is {EMAIL}"}
    first = await http.post("/conversations", json=body)
    assert first.status_code == 201, first.text
    second = await http.post("/conversations", json=body)
    assert second.status_code == 201, second.text
    assert first.json() == second.json() and first.json()["reply"]["turn"] == 1
    # the first reply has a message reply's fields, nulls included
    assert first.json()["reply"]["awaiting_confirmation"] is None and first.json()["reply"]["awaiting_approval"] is None
    state = (await http.get(f"/conversations/{cid}")).json()
    assert state["turn"] == 1 and state["customer"]["user_id"] == CUSTOMER  # the handler ran once
    assert await _eventually(lambda: _runs(client, f"support-{cid}")) == 1


async def test_a_retried_message_id_returns_the_original_reply_and_runs_once(stack):
    http, _, _ = stack
    cid = (await http.post("/conversations", json={})).json()["conversation_id"]
    url = f"/conversations/{cid}/messages"
    first = await http.post(url, json={"text": f"my email is {EMAIL}", "message_id": "m-1"})
    again = await http.post(url, json={"text": f"my email is {EMAIL}", "message_id": "m-1"})
    assert first.status_code == again.status_code == 200 and first.json() == again.json()
    assert (await http.get(f"/conversations/{cid}")).json()["turn"] == 1
    other = await http.post(url, json={"text": "thanks", "message_id": "m-2"})
    assert other.json()["turn"] == 2
    bad = await http.post(url, json={"text": "hi", "message_id": "has space"})
    assert bad.status_code == 422 and isinstance(bad.json()["detail"], str)
    assert (await http.get(f"/conversations/{cid}")).json()["turn"] == 2


async def test_unknown_store_is_a_422_and_leaves_nothing_running(stack):
    http, _, client = stack
    for body in ({"store": "no-such-store"}, {"store": "no-such-store", "text": "hello"}):
        cid = f"nostore-{uuid.uuid4().hex[:8]}"
        response = await http.post("/conversations", json={"conversation_id": cid, **body})
        assert response.status_code == 422, response.text
        assert "unknown store no-such-store" in response.json()["detail"]
        handle = client.get_workflow_handle_for(SupportWorkflow.run, f"support-{cid}")
        result = await asyncio.wait_for(handle.result(), 10)  # the conversation closed at once
        assert result.state.status.value == "cancelled" and result.state.turn == 0
    # the seed template is not a store either
    response = await http.post("/conversations", json={"store": "__seed__"})
    assert response.status_code == 422


async def test_a_running_id_with_another_store_is_a_conflict(stack):
    http, backend, _ = stack
    backend.seed_store("second")
    cid = f"stores-{uuid.uuid4().hex[:8]}"
    assert (await http.post("/conversations", json={"conversation_id": cid})).status_code == 201
    response = await http.post("/conversations", json={"conversation_id": cid, "store": "second"})
    assert response.status_code == 409, response.text
    state = (await http.get(f"/conversations/{cid}")).json()
    assert state["store"] == "main" and state["status"] == "active"


async def test_empty_and_oversized_bodies(stack):
    http, _, _ = stack
    cid = (await http.post("/conversations", json={})).json()["conversation_id"]
    for path in (f"/conversations/{cid}/messages", "/refunds", "/approvals/x~0123456789ab"):
        response = await http.post(path, content=b"", headers={"content-type": "application/json"})
        assert response.status_code == 422, (path, response.text)
        assert isinstance(response.json()["detail"], str)
    huge = json.dumps({"text": "x" * 200_000}).encode()
    response = await http.post(f"/conversations/{cid}/messages", content=huge,
                               headers={"content-type": "application/json"})
    assert response.status_code == 413 and "limit" in response.json()["detail"]

    async def chunked():  # no Content-Length: the body is counted as it streams in
        for start in range(0, len(huge), 16_384):
            yield huge[start:start + 16_384]

    response = await http.post(f"/conversations/{cid}/messages", content=chunked(),
                               headers={"content-type": "application/json"})
    assert response.status_code == 413 and "limit" in response.json()["detail"], response.text
    response = await http.post("/conversations", json={"text": "y" * 70_000})
    assert response.status_code == 422
    assert (await http.get(f"/conversations/{cid}")).json()["turn"] == 0


async def _pending_approval(http, refund_id: str):
    return (await http.get(f"/refunds/{refund_id}")).json().get("pending_approval")


async def test_a_standalone_refund_requested_twice_runs_once(stack):
    http, backend, client = stack
    body = {"request_id": "r-1", "order_id": PENDING, "operation": "cancel", "reason": "no longer needed"}
    first = await http.post("/refunds", json=body)
    assert first.status_code == 202, first.text
    refund_id = first.json()["refund_id"]
    assert refund_id.startswith("refund-main-W4566809-r-1.") and "/" not in refund_id and "#" not in refund_id
    again = await http.post("/refunds", json=body)
    assert again.status_code == 202 and again.json()["refund_id"] == refund_id

    # 826.70 is above the 500.00 approval threshold: a supervisor approves it, once
    waiting = await _eventually(lambda: _pending_approval(http, refund_id), 20)
    decided = await http.post(f"/approvals/{waiting}", json={"decision": "approve", "approver": "sup-ana"})
    assert decided.status_code == 200, decided.text
    assert decided.json()["status"] == "approved" and decided.json()["approver"] == "sup-ana"

    async def done():
        status = (await http.get(f"/refunds/{refund_id}")).json()
        return status if status["status"] not in ("running", "awaiting_approval") else None

    status = await _eventually(done, 20)
    assert status and status["status"] == "applied", status
    third = await http.post("/refunds", json=body)  # after it finished: still the same run
    assert third.json()["refund_id"] == refund_id and third.json()["status"] == "applied"
    assert order_details(backend, PENDING)["status"] == "cancelled"
    writes = [e for e in backend.ledger_entries("main") if e["tool"] == "cancel_pending_order"]
    assert len(writes) == 1 and writes[0]["idempotency_key"] == f"cancel_pending_order:{PENDING}:r-1.req"
    assert await _runs(client, refund_id) == 1

    conflict = await http.post("/refunds", json={**body, "reason": "ordered by mistake"})
    assert conflict.status_code == 409 and "other arguments" in conflict.json()["detail"]
    assert len(backend.ledger_entries("main")) == 1
    assert (await http.get(f"/refunds/{refund_id}")).json()["status"] == "applied"

    listed = await _eventually(lambda: _refund_ids(http, PENDING))
    assert refund_id in listed


async def _refund_ids(http: httpx.AsyncClient, order_id: str) -> list[str]:
    response = await http.get("/refunds", params={"order_id": order_id})
    assert response.status_code == 200, response.text
    return [item["refund_id"] for item in response.json()["items"]]


async def test_a_standalone_refund_runs_the_tools_own_policy_checks(stack):
    http, backend, _ = stack
    before = order_details(backend, PENDING)
    # another customer's card: refused by the one-customer clause, nothing written
    body = {"request_id": "pay-1", "order_id": PENDING, "operation": "modify_payment",
            "payment_method_id": OTHER_CARD}
    refund_id = (await http.post("/refunds", json=body)).json()["refund_id"]
    status = await _eventually(lambda: _finished(http, refund_id), 20)
    # the clause's sentence for callers, never the clause id or the text written for the model
    assert status["status"] == "refused" and status["reason"] == refund_refused("x (one-customer)"), status
    # an unknown cancel reason: the spec's own check
    body = {"request_id": "c-why", "order_id": PENDING, "operation": "cancel", "reason": "too expensive"}
    refund_id = (await http.post("/refunds", json=body)).json()["refund_id"]
    status = await _eventually(lambda: _finished(http, refund_id), 20)
    assert status["status"] == "refused" and status["reason"] == refund_refused("x (cancel-pending-only)"), status
    assert order_details(backend, PENDING) == before and backend.ledger_entries("main") == []
    # arguments the tool does not take, missing ones, unknown fields, bad ids: 422, nothing started
    for bad in ({"request_id": "b1", "order_id": PENDING, "operation": "cancel"},
                {"request_id": "b2", "order_id": PENDING, "operation": "cancel", "reason": "no longer needed",
                 "item_ids": ["1"]},
                {"request_id": "b3", "order_id": PENDING, "operation": "refund_everything"},
                {"request_id": "b4", "order_id": PENDING, "operation": "cancel", "amount": 10},
                {"request_id": "b.5", "order_id": PENDING, "operation": "cancel", "reason": "no longer needed"},
                {"request_id": "b6", "order_id": "#W1/../x", "operation": "cancel", "reason": "no longer needed"},
                # control characters in an argument: refused here, not a 202 and a refusal later by the policy
                {"request_id": "b7", "order_id": PENDING, "operation": "cancel", "reason": "no longer\u202eneeded"},
                {"request_id": "b8", "order_id": DELIVERED, "operation": "return", "item_ids": ["1096508426\u0007"],
                 "payment_method_id": CARD},
                {"request_id": "b9", "order_id": DELIVERED, "operation": "return", "item_ids": ["1096508426"],
                 "payment_method_id": CARD + "\n"}):
        response = await http.post("/refunds", json=bad)
        assert response.status_code == 422, (bad, response.text)
        assert "Error" not in response.json()["detail"]  # no exception names
    assert (await http.get("/refunds/refund-main-W4566809-b1.r0000000000")).status_code == 404
    # every missing argument named at once, not only the first
    missing = await http.post("/refunds", json={"request_id": "b10", "order_id": DELIVERED, "operation": "return"})
    assert missing.status_code == 422 and all(f in missing.json()["detail"] for f in ("item_ids", "payment_method_id"))
    listed = (await http.get("/refunds", params={"order_id": DELIVERED})).json()["items"]
    assert not [item for item in listed if any(f"-{r}." in item["refund_id"] for r in ("b8", "b9"))], listed
    assert order_details(backend, PENDING) == before


async def test_standalone_return_exchange_and_item_change_apply_once_each(stack):
    http, backend, _ = stack
    requests = {  # operation -> (body, the order's status afterwards); amounts below every approval rule
        "return": ({"order_id": DELIVERED, "item_ids": ["1096508426"], "payment_method_id": CARD},
                   "return requested"),
        "exchange": ({"order_id": "#W1067251", "item_ids": ["6452271382"], "new_item_ids": ["9580569596"],
                      "payment_method_id": CARD}, "exchange requested"),
        "modify_items": ({"order_id": PENDING, "item_ids": ["1569829406"], "new_item_ids": ["6901578702"],
                          "payment_method_id": CARD}, "pending (item modified)"),
    }
    ids = {}
    for operation, (body, _) in requests.items():
        response = await http.post("/refunds", json={"request_id": f"{operation}-1", "operation": operation, **body})
        assert response.status_code == 202, response.text
        ids[operation] = response.json()["refund_id"]
    for operation, (body, order_status) in requests.items():
        status = await _eventually(lambda: _finished(http, ids[operation]), 20)
        assert status and status["status"] == "applied", (operation, status)
        assert order_details(backend, body["order_id"])["status"] == order_status
    assert order_details(backend, PENDING)["items"][0]["item_id"] == "6901578702"
    keys = sorted(e["idempotency_key"] for e in backend.ledger_entries("main"))
    assert keys == sorted(["exchange_delivered_order_items:#W1067251:exchange-1.req",
                           f"modify_pending_order_items:{PENDING}:modify_items-1.req",
                           f"return_delivered_order_items:{DELIVERED}:return-1.req"])


async def _finished(http: httpx.AsyncClient, refund_id: str):
    status = (await http.get(f"/refunds/{refund_id}")).json()
    return status if status["status"] not in ("running", "awaiting_approval") else None


async def test_lists_filter_by_search_attributes_and_paginate(stack):
    http, _, client = stack
    tag = uuid.uuid4().hex[:8]
    customer, order = f"ada_{tag}", f"#W{tag}"
    started = []
    for i in range(3):
        cid = f"list-{tag}-{i}"
        attributes = [SearchAttributePair(CUSTOMER_ID, customer_pseudonym(customer, KEY)),
                      SearchAttributePair(ORDER_IDS, [f"#W{i}{tag}", order] if i else [f"#W{i}{tag}"]),
                      SearchAttributePair(STATUS, "active"), SearchAttributePair(STEP, "awaiting_confirmation")]
        if i == 2:
            attributes.append(SearchAttributePair(PENDING_APPROVAL, f"support-{cid}~0123456789ab"))
        # started on a queue no worker polls, so the attributes stay exactly as set here
        started.append(await client.start_workflow(
            SupportWorkflow.run, SupportInput(conversation_id=cid), id=f"support-{cid}", task_queue=f"idle-{tag}",
            search_attributes=TypedSearchAttributes(attributes)))
    try:
        async def page(**params):
            response = await http.get("/conversations", params={"customer_id": customer, **params})
            assert response.status_code == 200, response.text
            return response.json()

        full = await _eventually(lambda: _full(page), 15)
        assert {i["conversation_id"] for i in full["items"]} == {f"list-{tag}-{i}" for i in range(3)}
        assert all(i["customer_id"] == customer_pseudonym(customer, KEY) != customer for i in full["items"])
        first = await page(limit=2)
        assert len(first["items"]) == 2 and first["next_page_token"]
        rest = await page(limit=2, next_page_token=first["next_page_token"])
        assert len(rest["items"]) == 1 and not rest["next_page_token"]
        by_order = await page(order_id=order, step="awaiting_confirmation", status="active")
        assert {i["conversation_id"] for i in by_order["items"]} == {f"list-{tag}-1", f"list-{tag}-2"}
        assert all(order in i["order_ids"] for i in by_order["items"])
        pending = (await http.get("/approvals", params={"status": "pending", "limit": 100})).json()["items"]
        # no worker polls its queue, so its process cannot be read: listed with its ids only
        unread = dict.fromkeys(("operation", "reason", "requested_at", "expires_at", "decided_by", "decided_at"))
        assert {"approval_id": f"support-list-{tag}-2~0123456789ab", "process": "conversation",
                "process_id": f"list-{tag}-2", "status": "pending", **unread} in pending
        # a status no conversation has is refused as GET /refunds refuses one (it listed nothing, 200)
        for params in ({"customer_id": 'a" OR WorkflowId != "x'}, {"order_id": "#W 1"}, {"status": "é"},
                       {"status": "activ"}, {"status": "running"},
                       {"limit": 0}, {"limit": 101}, {"next_page_token": "not-a-token!"},
                       {"next_page_token": "AAAA"}, {"next_page_token": "\x00\x01"},
                       {"next_page_token": "eyJ4IjoxfQ=="},  # made-up tokens: refused before the server
                       {"next_page_token": first["next_page_token"], "status": "ended"}):  # another list's
            response = await http.get("/conversations", params=params)
            assert response.status_code == 422, (params, response.text)
        assert (await http.get("/approvals", params={"status": "approved"})).status_code == 422
        await _refunds_filter_like_conversations(http, client, customer, order, tag, started)
    finally:
        for handle in started:
            await handle.terminate("test finished")


async def _refunds_filter_like_conversations(http, client: Client, customer: str, order: str, tag: str,
                                             started: list) -> None:
    """GET /refunds by customer, order, status and step, paginated (runs on an idle queue)."""
    for i, step in enumerate(("awaiting_approval", "awaiting_approval", "done")):
        call = make_tool_call("cancel_pending_order", {"order_id": order, "reason": "no longer needed"})
        refund_id = f"refund-main-W{tag}-{i}"
        attributes = [SearchAttributePair(CUSTOMER_ID, customer_pseudonym(customer, KEY)),
                      SearchAttributePair(ORDER_IDS, [order]), SearchAttributePair(STEP, step),
                      SearchAttributePair(STATUS, "applied" if step == "done" else "running")]
        started.append(await client.start_workflow(
            RefundWorkflow.run, RefundInput(store="main", operation_id=f"{tag}.r{i}", call=call), id=refund_id,
            task_queue=f"idle-{tag}", search_attributes=TypedSearchAttributes(attributes)))

    async def refunds(**params):
        response = await http.get("/refunds", params={"customer_id": customer, **params})
        assert response.status_code == 200, response.text
        return response.json()

    async def all_three():
        body = await refunds()
        return body if len(body["items"]) == 3 else None

    assert await _eventually(all_three, 15)
    waiting = await refunds(order_id=order, step="awaiting_approval")
    assert {i["refund_id"] for i in waiting["items"]} == {f"refund-main-W{tag}-0", f"refund-main-W{tag}-1"}
    assert all(i["customer_id"] == customer_pseudonym(customer, KEY) for i in waiting["items"])
    assert [i["refund_id"] for i in (await refunds(step="done"))["items"]] == [f"refund-main-W{tag}-2"]
    # the status GET /refunds/{id} states ("awaiting_approval") filters the list the same way,
    # and is the items' status too; "running" is a running refund not waiting for a supervisor
    # (the list never says "running" for an item ?status=awaiting_approval selected)
    awaiting = await refunds(order_id=order, status="awaiting_approval")
    assert {i["refund_id"] for i in awaiting["items"]} == {f"refund-main-W{tag}-0", f"refund-main-W{tag}-1"}
    assert {i["status"] for i in awaiting["items"]} == {"awaiting_approval"}
    assert (await refunds(order_id=order, status="running"))["items"] == []
    assert (await refunds(order_id=order, step="awaiting_approval", status="running"))["items"] == []
    assert [i["status"] for i in (await refunds(step="done"))["items"]] == ["applied"]
    other = f"bo_{tag}"  # a running refund at another step (and another customer's: the lists above stay as they were)
    started.append(await client.start_workflow(
        RefundWorkflow.run, RefundInput(store="main", operation_id=f"{tag}.r3", call=make_tool_call(
            "cancel_pending_order", {"order_id": f"#W3{tag}", "reason": "no longer needed"})),
        id=f"refund-main-W{tag}-3", task_queue=f"idle-{tag}", search_attributes=TypedSearchAttributes([
            SearchAttributePair(CUSTOMER_ID, customer_pseudonym(other, KEY)), SearchAttributePair(STEP, "execute"),
            SearchAttributePair(STATUS, "running")])))
    running = await _eventually(lambda: _nonempty(refunds(customer_id=other, status="running")), 15)
    assert [(i["refund_id"], i["status"]) for i in running["items"]] == [(f"refund-main-W{tag}-3", "running")]
    first = await refunds(limit=2)
    rest = await refunds(limit=2, next_page_token=first["next_page_token"])
    assert len(first["items"]) == 2 and len(rest["items"]) == 1 and not rest["next_page_token"]
    for params in ({"step": 'done" OR Step != "x'}, {"order_id": "#W 1"}, {"limit": 0}, {"status": "bogus"}):
        assert (await http.get("/refunds", params=params)).status_code == 422, params


def test_the_conversation_status_filter_takes_exactly_the_conversation_statuses_and_stuck():
    from typing import get_args

    from starter.api.models import ConversationStatusFilter
    from starter.client.run_status import STUCK
    from workflows.domain.records import ConversationStatus

    taken = get_args(get_args(get_args(ConversationStatusFilter)[0])[0])
    # stuck is reported (Temporal's TemporalReportedProblems), never a status a state stores
    assert STUCK not in {s.value for s in ConversationStatus}
    assert set(taken) == {s.value for s in ConversationStatus} | {STUCK}


async def _nonempty(listed):
    body = await listed
    return body if body["items"] else None


async def _full(page):
    body = await page()
    return body if len(body["items"]) == 3 else None


async def test_approval_decisions_are_refused_for_unknown_ids(stack):
    http, _, _ = stack
    decision = {"decision": "approve", "approver": "sup-1"}
    response = await http.post("/approvals/not-an-approval-id", json=decision)
    assert response.status_code == 404 and "does not exist" in response.json()["detail"]
    response = await http.post(f"/approvals/support-missing-{uuid.uuid4().hex[:6]}~0123456789ab", json=decision)
    assert response.status_code == 404
    cid = (await http.post("/conversations", json={})).json()["conversation_id"]
    for bad in ({"decision": "maybe", "approver": "sup-1"}, {"decision": "approve", "approver": ""},
                {"decision": "approve", "approver": "sup 1"}):
        response = await http.post(f"/approvals/support-{cid}~0123456789ab", json=bad)
        assert response.status_code == 422, (bad, response.text)
    assert (await http.get(f"/conversations/{cid}")).json()["turn"] == 0


async def test_cancel_twice_while_a_write_runs_keeps_the_first_and_refuses_later_messages(temporal_env, settings,
                                                                                            tmp_path):
    from tests.workflow_harness import running_worker, until

    marker = tmp_path / "committed.marker"
    async with running_worker(temporal_env, settings, pause_after_write=(2.0, marker)) as (client, backend):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(lambda: client),
                                                                   raise_app_exceptions=False),
                                     base_url="http://statekeeper.test", timeout=60.0) as http:
            started = await http.post("/conversations", json={"text": f"Hi, my email is {EMAIL}"})
            cid = started.json()["conversation_id"]
            messages, cancel = f"/conversations/{cid}/messages", f"/conversations/{cid}/cancel"
            shown = await http.post(messages, json={"text": f"Please cancel order {PENDING}, I ordered it by mistake"})
            assert shown.json()["awaiting_confirmation"], shown.text
            yes = asyncio.ensure_future(http.post(messages, json={"text": "yes"}))
            await until(lambda: (marker.exists()), "the write's commit")
            first = await http.post(cancel, json={"reason": "customer hung up"})
            second = await http.post(cancel, json={"reason": "changed my mind", "rollback": True})
            assert (first.status_code, second.status_code) == (202, 202), (first.text, second.text)
            late = await http.post(messages, json={"text": "are you still there?"})
            assert late.status_code == 409 and "start a new conversation" in late.json()["detail"]
            answer = (await asyncio.wait_for(yes, 30)).json()
            assert answer["status"] == "cancelled" and f"Done: Cancel order {PENDING}" in answer["text"]
            state = (await http.get(f"/conversations/{cid}")).json()
            assert state["status"] == "cancelled" and state["ended_reason"] == "customer hung up"  # the first wins
            assert [s["status"] for s in state["steps"]] == ["done"] and state["turn"] == 3
            assert order_details(backend, PENDING)["status"] == "cancelled"
            assert len(backend.ledger_entries("main")) == 1
            finished = await _eventually(lambda: _closed(http, cancel), 10)
            assert finished.status_code == 409, finished.text  # a cancel once finished
            assert (await http.get(f"/conversations/{cid}")).json() == state  # intact


async def _closed(http: httpx.AsyncClient, cancel_path: str):
    response = await http.post(cancel_path, json={})
    return response if response.status_code != 202 else None
