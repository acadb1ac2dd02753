"""API keys, tenancy, roles and the audit log over real HTTP: the API served by uvicorn on a
loopback port (``api_beside``, as ``statekeeper dev`` serves it) with keys in its journal
database, a real worker and a real Temporal dev server.

Tenants: ``default`` (stores ``main`` and every unlisted one) and ``acme`` (store
``acme-store``). Keys: a service and an operator key of each, and two service keys of
``default`` scoped to one customer each. Startup refusals and the keyless loopback API are
tests/e2e/test_api_access.py; the role matrix alone tests/core/test_api_rules.py.
"""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import AsyncIterator

import httpx
import pytest
import sqlalchemy as sa

from temporalio.worker import Replayer

from settings import Settings
from starter.runtime.connection import data_converter
from starter.api.server import api_beside
from activities.store.audit import AuditLog
from starter.api.auth import access_from_settings
from activities.store.api_keys import KeyStore, Role
from tests.policy_fixtures import CUSTOMER, EMAIL, PENDING
from tests.workflow_harness import order_details
from starter.runtime.worker import workflow_runner
from workflows.options import TENANT
from workflows.refund.workflow import RefundWorkflow
from workflows.conversation.workflow import SupportWorkflow
from workflows.domain.pseudonym import customer_pseudonym
from tests.ports import free_port

OTHER_CUSTOMER = "sofia_rossi_8776"
BIG_ORDER = "#W5918442"  # sofia_rossi_8776, pending, 1463.70: a refund above the approval threshold
CANCEL_TEXT = f"Hi, my email is {EMAIL}. Please cancel order {PENDING}, I no longer need it."


@pytest.fixture(scope="module")
async def stack(temporal_env, tmp_path_factory) -> AsyncIterator[SimpleNamespace]:
    from starter.runtime.worker import build_backend, build_worker

    tmp = tmp_path_factory.mktemp("auth")
    settings = Settings(database_url=f"sqlite:///{tmp / 'sor.sqlite'}", data_dir=tmp, anthropic_api_key=None,
                        task_queue=f"auth-{uuid.uuid4().hex[:8]}", sandbox_project_modules=True,
                        store_tenants={"acme-store": "acme"})
    pseudonym_key = settings.pseudonym_secret()  # the workers' key, made before any client reads it
    backend = build_backend(settings)
    for store in ("acme-store", "s-yes", "s-refund", "s-refund-2"):
        backend.seed_store(store)
    keys = KeyStore(settings.resolved_journal_url(), settings.api_key_hmac_secret())
    made = {
        "svc": keys.create("default", Role.SERVICE, label="backend"),
        "op": keys.create("default", Role.OPERATOR),
        "acme_svc": keys.create("acme", Role.SERVICE),
        "acme_op": keys.create("acme", Role.OPERATOR),
        "raj": keys.create("default", Role.SERVICE, customer=customer_pseudonym(CUSTOMER, pseudonym_key)),
        "sofia": keys.create("default", Role.SERVICE, customer=customer_pseudonym(OTHER_CUSTOMER, pseudonym_key)),
    }
    access = access_from_settings(settings, "127.0.0.1")
    assert not access.keyless  # keys exist: every caller needs one, loopback included
    async with build_worker(temporal_env.client, settings, backend):
        async with api_beside(temporal_env.client, settings, host="127.0.0.1", port=free_port(),
                              access=access) as url:
            async with httpx.AsyncClient(base_url=url, timeout=60.0) as http:
                yield SimpleNamespace(http=http, backend=backend, temporal=temporal_env.client, settings=settings,
                                      ids={n: r.key_id for n, (r, _) in made.items()},
                                      headers={n: {"Authorization": f"Bearer {k}"} for n, (_, k) in made.items()},
                                      audit=AuditLog(settings.resolved_journal_url()),
                                      pseudonym=lambda c: customer_pseudonym(c, pseudonym_key))


async def _eventually(check, seconds: float = 20.0):
    for _ in range(int(seconds / 0.2)):
        result = await check()
        if result:
            return result
        await asyncio.sleep(0.2)
    return None


async def _conversation(s, who: str, **body) -> dict:
    response = await s.http.post("/conversations", json=body, headers=s.headers[who])
    assert response.status_code == 201, response.text
    return response.json()


async def _state(s, cid: str, who: str = "op") -> dict:
    response = await s.http.get(f"/conversations/{cid}", headers=s.headers[who])
    assert response.status_code == 200, response.text
    return response.json()


async def _awaiting_refund(s, who: str, store: str) -> tuple[str, str]:
    """A standalone refund above the threshold, started by ``who``: (refund id, approval id)."""
    body = {"request_id": f"auth-{uuid.uuid4().hex[:8]}", "order_id": BIG_ORDER, "operation": "cancel",
            "reason": "no longer needed", "store": store}
    response = await s.http.post("/refunds", json=body, headers=s.headers[who])
    assert response.status_code == 202, response.text
    refund_id = response.json()["refund_id"]

    async def pending():
        return (await s.http.get(f"/refunds/{refund_id}", headers=s.headers[who])).json().get("pending_approval")
    return refund_id, await _eventually(pending)


async def test_no_key_is_a_401_with_a_clear_reason_and_starts_nothing(stack):
    s = stack
    cid = f"nokey-{uuid.uuid4().hex[:8]}"
    routes = (("POST", "/conversations", {"conversation_id": cid, "text": "hi"}),
              ("POST", f"/conversations/{cid}/messages", {"text": "yes"}), ("GET", f"/conversations/{cid}", None),
              ("POST", f"/conversations/{cid}/cancel", {}), ("GET", "/conversations", None),
              ("GET", f"/conversations/{cid}/transcript", None),
              ("POST", "/refunds", {"request_id": "nokey", "order_id": PENDING, "operation": "cancel",
                                    "reason": "no longer needed"}),
              ("GET", "/refunds", None), ("GET", "/refunds/refund-x", None), ("GET", "/approvals", None),
              ("POST", "/approvals/support-x~0123456789ab", {"decision": "approve", "approver": "me"}),
              ("POST", f"/conversations/{cid}/messages", b"{not json"))  # refused before the body is parsed
    for headers, reason in (({}, "an API key is required"),
                            ({"Authorization": "Bearer sk_0123456789ab_" + "A" * 43}, "not valid"),
                            ({"Authorization": "Basic dXNlcjpwdw=="}, "an API key is required"),
                            ({"X-API-Key": "hello"}, "not valid")):
        for method, path, body in routes:
            content = body if isinstance(body, bytes) else None
            response = await s.http.request(method, path, json=None if content else body, content=content,
                                            headers={**headers, "content-type": "application/json"})
            assert response.status_code == 401, (method, path, response.text)
            assert reason in response.json()["detail"] and response.headers["www-authenticate"] == "Bearer"
    assert (await s.temporal.count_workflows(f'WorkflowId = "support-{cid}"')).count == 0
    # the X-API-Key header works as well as Bearer; health and the OpenAPI document are open
    key_only = {"X-API-Key": s.headers["svc"]["Authorization"].removeprefix("Bearer ")}
    assert (await s.http.get("/conversations", headers=key_only)).status_code == 200
    assert (await s.http.get("/healthz")).status_code in (200, 503)
    document = (await s.http.get("/openapi.json")).json()
    assert {"bearer", "apiKey"} <= set(document["components"]["securitySchemes"])
    assert "401" in document["paths"]["/conversations/{conversation_id}"]["get"]["responses"]


async def test_another_tenant_gets_404_on_every_route_and_lists_only_its_own(stack):
    s = stack
    cid = (await _conversation(s, "svc", text=f"Hi, my email is {EMAIL}"))["conversation_id"]
    acme_cid = (await _conversation(s, "acme_svc", store="acme-store"))["conversation_id"]
    refund_id, approval_id = await _awaiting_refund(s, "svc", "s-refund")
    assert approval_id
    before = await _state(s, cid)

    async def refused(method, path, body, missing_path):
        response = await s.http.request(method, path, json=body, headers=s.headers["acme_op"])
        absent = await s.http.request(method, missing_path, json=body, headers=s.headers["acme_op"])
        assert response.status_code == absent.status_code == 404, (path, response.text, absent.text)
        # word for word what a process that does not exist gets: nothing tells them apart
        return response.json()["detail"], absent.json()["detail"]

    gone = f"gone-{uuid.uuid4().hex[:8]}"
    for method, suffix, body in (("GET", "", None), ("POST", "/messages", {"text": "yes"}),
                                 ("POST", "/cancel", {}), ("GET", "/transcript", None)):
        detail, absent = await refused(method, f"/conversations/{cid}{suffix}", body, f"/conversations/{gone}{suffix}")
        assert detail == absent.replace(gone, cid)
    detail, absent = await refused("GET", f"/refunds/{refund_id}", None, f"/refunds/{refund_id}x")
    assert detail == absent.replace(f"{refund_id}x", refund_id)
    decision = {"decision": "approve", "approver": "mallory"}
    detail, absent = await refused("POST", f"/approvals/{approval_id}", decision, f"/approvals/{refund_id}x~0123456789ab")
    assert detail == absent.replace(f"{refund_id}x~0123456789ab", approval_id)

    # starting on another tenant's conversation id or store is refused; nothing reaches it
    taken = await s.http.post("/conversations", json={"conversation_id": cid, "store": "acme-store", "text": "yes"},
                              headers=s.headers["acme_svc"])
    assert taken.status_code == 409 and "taken" in taken.json()["detail"]
    for who, store in (("acme_svc", "main"), ("svc", "acme-store")):
        response = await s.http.post("/conversations", json={"store": store}, headers=s.headers[who])
        assert response.status_code == 422 and f"unknown store {store}" in response.json()["detail"]
    response = await s.http.post("/refunds", json={"request_id": "x1", "order_id": BIG_ORDER, "operation": "cancel",
                                                   "reason": "no longer needed"}, headers=s.headers["acme_svc"])
    assert response.status_code == 422 and "unknown store main" in response.json()["detail"]
    assert await _state(s, cid) == before  # not a turn, not a cancel
    status = (await s.http.get(f"/refunds/{refund_id}", headers=s.headers["op"])).json()
    assert status["status"] == "awaiting_approval" and status["pending_approval"] == approval_id

    async def listed(who, path):
        response = await s.http.get(path, headers=s.headers[who])
        assert response.status_code == 200, response.text
        return {next(v for k, v in item.items() if k.endswith("_id")) for item in response.json()["items"]}

    assert await _eventually(lambda: _has(listed("op", "/conversations?limit=100"), cid))
    assert await _eventually(lambda: _has(listed("op", "/approvals?limit=100"), approval_id))
    assert await _eventually(lambda: _has(listed("acme_op", "/conversations?limit=100"), acme_cid))
    acme_sees = await listed("acme_op", "/conversations?limit=100")
    assert cid not in acme_sees and acme_cid not in await listed("op", "/conversations?limit=100")
    assert approval_id not in await listed("acme_op", "/approvals?limit=100")
    assert refund_id not in await listed("acme_op", f"/refunds?order_id={BIG_ORDER.replace('#', '%23')}")
    assert refund_id in await listed("op", f"/refunds?order_id={BIG_ORDER.replace('#', '%23')}&limit=100")


async def _has(awaitable, item) -> bool:
    return item in await awaitable


async def test_only_an_operator_may_approve_cancel_or_list_approvals(stack):
    s = stack
    refund_id, approval_id = await _awaiting_refund(s, "svc", "s-refund-2")
    cid = (await _conversation(s, "svc"))["conversation_id"]
    decision = {"decision": "approve", "approver": "svc-1"}
    for who in ("svc", "raj"):
        for method, path, body in (("POST", f"/approvals/{approval_id}", decision), ("GET", "/approvals", None),
                                   ("POST", f"/conversations/{cid}/cancel", {"rollback": True}),
                                   ("POST", f"/conversations/{cid}/cancel", {})):
            response = await s.http.request(method, path, json=body, headers=s.headers[who])
            assert response.status_code == 403, (who, path, response.text)
            assert "operator key" in response.json()["detail"]
    for method, path, body in (("POST", "/refunds", {"request_id": "r9", "order_id": PENDING, "operation": "cancel",
                                                     "reason": "no longer needed"}),
                               ("GET", f"/refunds/{refund_id}", None), ("GET", "/refunds", None)):
        response = await s.http.request(method, path, json=body, headers=s.headers["raj"])
        assert response.status_code == 403 and "tenant-wide key" in response.json()["detail"], response.text
    # nothing moved: the approval still waits, the conversation still runs
    assert (await s.http.get(f"/refunds/{refund_id}", headers=s.headers["svc"])).json()["status"] == "awaiting_approval"
    assert (await _state(s, cid))["status"] == "active"
    approved = await s.http.post(f"/approvals/{approval_id}", json={"decision": "approve", "approver": "sup-1"},
                                 headers=s.headers["op"])
    assert approved.status_code == 200 and approved.json()["approver"] == "sup-1"
    cancelled = await s.http.post(f"/conversations/{cid}/cancel", json={}, headers=s.headers["op"])
    assert cancelled.status_code == 202


async def test_a_customer_scoped_key_sees_only_its_customer(stack):
    s = stack
    mine = await _conversation(s, "raj", text=f"Hi, my email is {EMAIL}")
    cid = mine["conversation_id"]
    assert (await _state(s, cid, "raj"))["customer"]["user_id"] == CUSTOMER
    anonymous = (await _conversation(s, "svc"))["conversation_id"]  # no customer known yet
    for path, body in ((f"/conversations/{cid}", None), (f"/conversations/{cid}/messages", {"text": "yes"}),
                       (f"/conversations/{cid}/transcript", None), (f"/conversations/{anonymous}", None)):
        response = await s.http.request("POST" if body else "GET", path, json=body, headers=s.headers["sofia"])
        assert response.status_code == 404, (path, response.text)
    assert (await s.http.get(f"/conversations/{anonymous}", headers=s.headers["raj"])).status_code == 404
    raj = s.pseudonym(CUSTOMER)

    async def own_list():
        items = (await s.http.get("/conversations?limit=100", headers=s.headers["raj"])).json()["items"]
        return items if any(i["conversation_id"] == cid for i in items) else None
    items = await _eventually(own_list)
    assert items and all(i["customer_id"] == raj for i in items)
    # a customer filter cannot widen the scope
    other = await s.http.get(f"/conversations?customer_id={OTHER_CUSTOMER}", headers=s.headers["raj"])
    assert other.status_code == 200 and other.json()["items"] == []
    sofia = (await s.http.get("/conversations?limit=100", headers=s.headers["sofia"])).json()["items"]
    assert cid not in {i["conversation_id"] for i in sofia}


async def test_the_anonymous_yes_to_another_customers_cancel_is_refused_and_writes_nothing(stack):
    s = stack
    started = await _conversation(s, "svc", store="s-yes", text=CANCEL_TEXT)
    cid = started["conversation_id"]
    before = await _state(s, cid)
    assert before["pending_confirmation"] is not None, started  # "shall I cancel ...? (yes/no)"
    for headers, status in (({}, 401), (s.headers["acme_op"], 404), (s.headers["sofia"], 404),
                            ({"Authorization": "Bearer " + "sk_ffffffffffff_" + "B" * 43}, 401)):
        for body in ({"text": "yes"}, {"text": "yes", "message_id": "yes-1"}):
            response = await s.http.post(f"/conversations/{cid}/messages", json=body, headers=headers)
            assert response.status_code == status, response.text
        for store in ("s-yes", "acme-store"):  # as a "start" on its id: a refused store, or a taken id
            response = await s.http.post("/conversations", json={"conversation_id": cid, "store": store, "text": "yes"},
                                         headers=headers)
            assert response.status_code in ({401} if status == 401 else {409, 422}), response.text
    assert await _state(s, cid) == before
    assert order_details(s.backend, PENDING, "s-yes")["status"] == "pending"
    assert s.backend.ledger_entries("s-yes") == []
    # the customer's own service still can: the confirmation goes on
    response = await s.http.post(f"/conversations/{cid}/messages", json={"text": "yes"}, headers=s.headers["svc"])
    assert response.status_code == 200 and (await _state(s, cid))["pending_confirmation"] is None


async def test_reads_of_personal_data_are_audited_and_unaudited_reads_are_not_served(stack):
    s = stack
    cid = (await _conversation(s, "svc", text=f"Hi, my email is {EMAIL}"))["conversation_id"]
    await _state(s, cid, "op")
    assert (await s.http.get(f"/conversations/{cid}/transcript?format=text", headers=s.headers["op"])).status_code == 200
    assert (await s.http.get(f"/conversations?customer_id={CUSTOMER}", headers=s.headers["svc"])).status_code == 200
    assert (await s.http.get("/conversations", headers=s.headers["raj"])).status_code == 200
    await s.http.get(f"/conversations/{cid}", headers=s.headers["acme_op"])  # refused: not a read
    entries = s.audit.entries(subject=cid)
    assert [(e.actor, e.action) for e in entries] == [(f"key:{s.ids['op']}", "read_state"),
                                                      (f"key:{s.ids['op']}", "read_transcript")]
    assert entries[1].detail == "tenant=default format=text"
    listed = s.audit.entries(subject=s.pseudonym(CUSTOMER))
    assert {(e.actor, e.action) for e in listed} >= {(f"key:{s.ids['svc']}", "list_conversations_by_customer"),
                                                     (f"key:{s.ids['raj']}", "list_conversations_by_customer")}
    every = " ".join(f"{e.actor} {e.action} {e.subject} {e.detail}" for e in s.audit.entries())
    assert EMAIL not in every and CUSTOMER not in every  # opaque ids only
    # a read whose audit entry cannot be written is refused, and its data not served
    engine = sa.create_engine(s.settings.resolved_journal_url())
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE audit_log RENAME TO audit_log_away")
    try:
        response = await s.http.get(f"/conversations/{cid}", headers=s.headers["op"])
        assert response.status_code == 503 and response.json() == {"detail": "the audit log is not reachable; retry later"}
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE audit_log_away RENAME TO audit_log")
        engine.dispose()
    assert len(s.audit.entries(subject=cid)) == 2


async def test_a_conversations_refund_child_belongs_to_its_tenant(stack):
    s = stack
    started = await _conversation(s, "acme_svc", store="acme-store", text=CANCEL_TEXT)
    cid = started["conversation_id"]
    assert (await _state(s, cid, "acme_op"))["pending_confirmation"] is not None
    reply = await s.http.post(f"/conversations/{cid}/messages", json={"text": "yes"}, headers=s.headers["acme_svc"])
    assert reply.status_code == 200, reply.text

    async def child():
        ops = (await _state(s, cid, "acme_op"))["completed_operations"]
        return next((o["child_workflow_id"] for o in ops if o.get("child_workflow_id")), None)

    async def approval():
        items = (await s.http.get("/approvals", headers=s.headers["acme_op"])).json()["items"]
        return next((i["approval_id"] for i in items if i["process_id"] in (cid, )), None)
    approval_id = await _eventually(approval)
    if approval_id:  # above the threshold: the conversation waits for acme's supervisor
        assert (await s.http.post(f"/approvals/{approval_id}", json={"decision": "approve", "approver": "x"},
                                  headers=s.headers["op"])).status_code == 404
        decided = await s.http.post(f"/approvals/{approval_id}", json={"decision": "approve", "approver": "acme-sup"},
                                    headers=s.headers["acme_op"])
        assert decided.status_code == 200, decided.text
    child_id = await _eventually(child, 30)
    assert child_id, await _state(s, cid, "acme_op")
    description = await s.temporal.get_workflow_handle(child_id).describe()
    assert description.typed_search_attributes.get(TENANT) == "acme"
    assert (await s.http.get(f"/refunds/{child_id}", headers=s.headers["acme_op"])).status_code == 200
    assert (await s.http.get(f"/refunds/{child_id}", headers=s.headers["op"])).status_code == 404
    # the child's start with its tenant replays
    history = await s.temporal.get_workflow_handle(f"support-{cid}").fetch_history()
    replayer = Replayer(workflows=[SupportWorkflow, RefundWorkflow], data_converter=data_converter(),
                        workflow_runner=workflow_runner())
    await replayer.replay_workflow(history)


async def test_a_scoped_conversation_that_authenticates_another_customer_withholds_the_reply(stack):
    # a key scoped to raj opens a conversation as sofia: her order must not come back
    s = stack
    cid = f"scoped-{uuid.uuid4().hex[:8]}"
    text = "Hi, my email is sofia.rossi2645@example.com. What is the status of order #W5918442?"
    response = await s.http.post("/conversations", json={"conversation_id": cid, "text": text},
                                 headers=s.headers["raj"])
    assert response.status_code == 404, response.text
    assert "W5918442" not in response.text and "sofia" not in response.text.lower()
    state = await _state(s, cid, "op")  # an operator sees why: it was cancelled, nothing more runs
    assert state["status"] == "cancelled" and state["customer"]["user_id"] == OTHER_CUSTOMER
    entries = s.audit.entries(subject=cid)
    assert (f"key:{s.ids['raj']}", "withheld_reply") in {(e.actor, e.action) for e in entries}
    # the same key's own conversations go on as usual
    mine = await _conversation(s, "raj", text=f"Hi, my email is {EMAIL}")
    assert mine["reply"] and (await _state(s, mine["conversation_id"], "raj"))["customer"]["user_id"] == CUSTOMER


async def test_an_id_only_the_journal_remembers_is_not_started_again_and_its_transcript_stays_private(stack):
    # once Temporal's namespace retention has dropped a conversation's runs, starting its id again
    # (another tenant, another customer's scoped key) would let the caller read the old
    # conversation's transcript, kept in the journal, as their own
    from datetime import datetime, timezone

    from temporalio.service import RPCError, RPCStatusCode

    from activities.store.journal import JournalStore
    from workflows.domain.journal import EntryKind, Role, TranscriptRecord, TurnRecord

    s = stack
    cid = f"retained-only-in-journal-{uuid.uuid4().hex[:8]}"
    journal = JournalStore(s.settings.resolved_journal_url())
    said = f"Hi, my email is {EMAIL}"
    journal.record_turn(TurnRecord(conversation_id=cid, customer_id=CUSTOMER, turn=1, transcript=[
        TranscriptRecord(turn=1, seq=0, role=Role.USER, kind=EntryKind.MESSAGE, text=said, message_id="msg-m-1",
                         at=datetime.now(timezone.utc))]))
    before = journal.transcript(cid)
    for who in ("acme_svc", "sofia", "svc", "op"):
        store = "acme-store" if who == "acme_svc" else "main"
        for body in ({"conversation_id": cid, "store": store}, {"conversation_id": cid, "store": store, "text": "hi"}):
            response = await s.http.post("/conversations", json=body, headers=s.headers[who])
            assert response.status_code == 409, (who, response.text)
            assert response.json() == {"detail": f"conversation id {cid} was used before; choose a new "
                                                 "conversation id"}
        transcript = await s.http.get(f"/conversations/{cid}/transcript", headers=s.headers[who])
        assert transcript.status_code in (403, 404) and EMAIL not in transcript.text, (who, transcript.text)
    with pytest.raises(RPCError) as gone:  # nothing was started
        await s.temporal.get_workflow_handle(f"support-{cid}").describe()
    assert gone.value.status is RPCStatusCode.NOT_FOUND
    assert journal.transcript(cid) == before  # the old record is intact, not overwritten by a new turn 1
    journal.close()


async def test_an_operators_decision_and_cancel_are_audited_with_the_key_that_made_them(stack):
    """The approver is a name the caller types, so the audit log records which key approved (or
    cancelled): otherwise an operator key could approve a refund as anyone. A decision and a
    cancel are recorded with their key, as a resolution is, before they are sent, and one
    whose entry cannot be written is not sent."""
    s = stack
    s.backend.seed_store("s-audit")  # an order of its own: the other tests' refunds cancel theirs
    refund_id, approval_id = await _awaiting_refund(s, "svc", "s-audit")
    cid = (await _conversation(s, "svc"))["conversation_id"]
    engine = sa.create_engine(s.settings.resolved_journal_url())
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE audit_log RENAME TO audit_log_away")
    try:
        for path, body in ((f"/approvals/{approval_id}", {"decision": "approve", "approver": "sup-9"}),
                           (f"/conversations/{cid}/cancel", {"reason": "x"})):
            response = await s.http.post(path, json=body, headers=s.headers["op"])
            assert response.status_code == 503, (path, response.text)
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE audit_log_away RENAME TO audit_log")
        engine.dispose()
    assert (await s.http.get(f"/refunds/{refund_id}", headers=s.headers["svc"])).json()["status"] == "awaiting_approval"
    assert (await _state(s, cid))["status"] == "active"
    approved = await s.http.post(f"/approvals/{approval_id}", json={"decision": "approve", "approver": "sup-9"},
                                 headers=s.headers["op"])
    assert approved.status_code == 200, approved.text
    assert (await s.http.post(f"/conversations/{cid}/cancel", json={"rollback": True},
                              headers=s.headers["op"])).status_code == 202
    decided = s.audit.entries(subject=approval_id)
    assert [(e.actor, e.action) for e in decided] == [(f"key:{s.ids['op']}", "decide_approval")]
    assert decided[0].detail == "tenant=default decision=approve approver=sup-9"
    cancelled = s.audit.entries(subject=cid, action="cancel_conversation")
    assert [(e.actor, e.detail) for e in cancelled] == [(f"key:{s.ids['op']}", "tenant=default rollback=True")]
