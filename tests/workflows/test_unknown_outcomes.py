"""Writes whose outcome is in doubt, each on the real parts: a Temporal dev server, a worker,
the retail system of record and the external services over HTTP (PostgreSQL where the case
needs it). Only the model is faked, at its boundary.

- a NUL in a transfer summary, which PostgreSQL refuses in the ticket insert: the user is not
  told they are being transferred without a ticket;
- a NUL in an address is refused as invalid data, not retried and escalated;
- with a row lock held on the order past the write timeout, no abandoned attempt of a cancel
  commits it after the conversation has given up and escalated;
- a reset after an applied refund reports it applied and moves the money once; a payment whose
  outcome cannot be told is escalated, never sent again; an escalation without a ticket never
  promises a human.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import httpx
import sqlalchemy as sa

from tests.journal_fixtures import postgres_database
from tests.policy_fixtures import CUSTOMER, EMAIL, PENDING
from tests.service_fixtures import arm, pg_services, services  # noqa: F401 - fixtures
from tests.workflow_harness import ListBrain, call, order_details, running_worker
from workflows.domain import replies


async def test_a_nul_in_a_transfer_summary_is_not_reported_as_a_transfer(temporal_env, settings,
                                                                          pg_services):  # noqa: F811
    brain = ListBrain([{"kind": "transfer_to_human", "summary": "customer wants\x00a human"}])
    async with running_worker(temporal_env, settings, brain=brain, services=pg_services) as (client, _backend):
        cid = await client.start_conversation(f"nul-transfer-{uuid.uuid4().hex[:6]}")
        started = asyncio.get_running_loop().time()
        reply = await client.send_message(cid, "I want a human")
        elapsed = asyncio.get_running_loop().time() - started
        assert reply.text == replies.TRANSFER_FAILED and reply.status == "active"
        state = await client.state(cid)
        assert any("refused the data as invalid" in r.reason for r in state.rejections)
    tickets = httpx.get(f"{pg_services['ticketing']}/tickets", params={"reference": f"transfer:{cid}:t1"}).json()
    assert tickets == []
    assert elapsed < 10  # refused at once: not retried (six retries took far longer)


async def test_a_nul_in_an_address_is_refused_as_invalid_data_not_escalated(temporal_env, settings):
    with postgres_database() as url:
        settings = settings.model_copy(update={"database_url": url})
        brain = ListBrain([
            call("find_user_id_by_email", email=EMAIL),
            call("get_user_details", user_id=CUSTOMER),
            call("get_order_details", order_id=PENDING),
            call("modify_pending_order_address", order_id=PENDING, address1="1 Main\x00St", address2="",
                 city="Austin", state="TX", country="USA", zip="78701"),
        ])
        async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
            before = order_details(backend, PENDING)["address"]
            cid = await client.start_conversation(f"nul-address-{uuid.uuid4().hex[:6]}")
            shown = await client.send_message(cid, f"my email is {EMAIL}, change the address of {PENDING}")
            assert shown.awaiting_confirmation
            done = await client.send_message(cid, "yes")
            assert done.status == "active"  # not escalated
            state = await client.state(cid)
            step = next(s for s in state.steps if s.name == "modify_pending_order_address")
            assert step.status.value == "failed" and "refused the data as invalid" in (step.error or "")
            assert order_details(backend, PENDING)["address"] == before
            assert backend.ledger_entries("main") == []
            backend.engine.dispose()


async def test_a_row_lock_past_the_write_timeout_never_commits_later(temporal_env, settings):
    with postgres_database() as url:
        settings = settings.model_copy(update={"database_url": url, "write_timeout_seconds": 2.0})
        brain = ListBrain([
            call("find_user_id_by_email", email=EMAIL),
            call("get_user_details", user_id=CUSTOMER),
            call("get_order_details", order_id=PENDING),
            call("cancel_pending_order", order_id=PENDING, reason="no longer needed"),
        ])
        async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
            cid = await client.start_conversation(f"row-lock-{uuid.uuid4().hex[:6]}")
            assert (await client.send_message(cid, f"my email is {EMAIL}, cancel {PENDING}")).awaiting_confirmation
            locker = sa.create_engine(url)
            with contextlib.ExitStack() as stack:
                conn = stack.enter_context(locker.connect())
                conn.begin()
                conn.execute(sa.text("SELECT 1 FROM orders WHERE order_id = :o FOR UPDATE"), {"o": PENDING})
                done = await client.send_message(cid, "yes")  # every attempt meets the lock
                assert done.status == "escalated" and done.text == replies.ESCALATED
                conn.rollback()  # the lock goes: an abandoned attempt would commit now
            await asyncio.sleep(3.0)
            assert order_details(backend, PENDING)["status"] == "pending"
            assert backend.ledger_entries("main") == []
            with locker.connect() as conn:
                waiting = conn.execute(sa.text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock'")).scalar_one()
            assert waiting == 0
            state = await client.state(cid)
            step = next(s for s in state.steps if s.name == "cancel_pending_order")
            assert step.status.value == "unknown"
            locker.dispose()
            backend.engine.dispose()


async def test_a_reset_after_an_applied_refund_reports_it_applied_and_moves_money_once(
        temporal_env, settings, services):  # noqa: F811
    """A reset to before the user's yes starts the refund child again; its fresh read sees the
    order cancelled. The ledger is asked first (by the write's key, and the payments service
    by the payments key), so the user hears it applied and the money moved once."""
    from tests.resets import message_points, reset_to, wait_for_turn
    from tests.workflows.test_reset_outcomes import CANCEL

    async with running_worker(temporal_env, settings, brain=CANCEL, services=services) as (client, backend):
        cid = f"reset-svc-{uuid.uuid4().hex[:6]}"
        await client.start_conversation(cid)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        assert (await client.send_message(cid, f"cancel {PENDING} please")).awaiting_confirmation
        await client.send_message(cid, "yes")
        point = (await message_points(temporal_env, f"support-{cid}"))[-1]  # the yes's: keeps the proposal
        [first] = (await client.state(cid)).completed_operations
        await reset_to(temporal_env, f"support-{cid}", point)
        await wait_for_turn(client, cid, 2)
        await client.send_message(cid, "yes")
        state = await client.state(cid)
        [again] = state.completed_operations
        step = next(s for s in state.steps if s.name == "cancel_pending_order")
    assert again.ok and again.result == first.result and step.status.value == "done"
    assert backend.duplicate_writes("main") == 0
    assert len(httpx.get(f"{services['payments']}/operations", params={"reference": PENDING}).json()) == 1


async def test_a_payment_whose_outcome_cannot_be_told_is_escalated_not_replayed(temporal_env, settings, tmp_path):
    """The payments service takes the money request, then goes away before answering; the next
    attempt finds the request dispatched and cannot ask (the service is down): OutcomeUnknown,
    never sent again. The conversation re-checks (still cannot tell), marks the step unknown,
    opens a ticket and tells the user exactly that."""
    from systems.fleet import Fleet, sqlite_databases

    fleet = Fleet(sqlite_databases(tmp_path))
    urls = fleet.start()
    try:
        arm(urls["payments"], "answer_after_timeout", seconds=30.0)
        fast = settings.model_copy(update={"write_timeout_seconds": 3.0})
        async with running_worker(temporal_env, fast, brain=ListBrain(CANCEL_BRAIN), services=urls) as (client, backend):
            cid = f"pay-unknown-{uuid.uuid4().hex[:6]}"
            answer = await _yes_while_payments_vanish(client, fleet, urls, cid)
            assert answer.text == replies.ESCALATED and answer.status == "escalated"
            state = await client.state(cid)
            step = next(s for s in state.steps if s.name == "cancel_pending_order")
            assert step.status.value == "unknown"
            key = f"cancel_pending_order:{PENDING}:{cid}.t1"
            tickets = httpx.get(f"{urls['ticketing']}/tickets", params={"reference": f"escalate:{key}"}).json()
            assert len(tickets) == 1
            assert [e["ok"] for e in backend.ledger_entries("main")] == [True]  # the order side is recorded
            # replay-check refuses it: the payments request was dispatched and cannot be told
            from starter.ops.replay_check import Systems, check
            systems = Systems.from_settings(fast.model_copy(update={f"{n}_url": u for n, u in urls.items()}))
            report = await check(temporal_env.client, cid, systems)
            systems.close()
            [write] = [e for e in report.effects if e.activity == "run_write_tool"]  # in the refund child
            assert report.verdict == "refuse" and write.status == "unknown" and write.key == key
            assert f"payments: pay:{key} dispatched without a recorded result" in write.reason
    finally:
        fleet.stop()
    import sqlalchemy as sa_
    payments = sa_.create_engine(sqlite_databases(tmp_path)["payments"])
    with payments.connect() as conn:  # sent once, never replayed
        assert conn.execute(sa_.text("SELECT count(*) FROM payment_operations")).scalar_one() == 1
    payments.dispose()


async def test_an_escalation_without_a_ticket_does_not_promise_a_human(temporal_env, settings, tmp_path):
    """Payments cannot tell and the ticketing service refuses every request: the user is told
    that no case could be opened (never that a human agent has the case, with no ticket); the
    state says so, with the ticketing system named."""
    from systems.fleet import Fleet, sqlite_databases

    fleet = Fleet(sqlite_databases(tmp_path))
    urls = fleet.start()
    try:
        arm(urls["payments"], "answer_after_timeout", seconds=30.0)
        arm(urls["ticketing"], "http_5xx", count=100)
        fast = settings.model_copy(update={"write_timeout_seconds": 3.0})
        async with running_worker(temporal_env, fast, brain=ListBrain(CANCEL_BRAIN), services=urls) as (client, _):
            cid = f"no-ticket-{uuid.uuid4().hex[:6]}"
            answer = await _yes_while_payments_vanish(client, fleet, urls, cid)
            assert answer.status == "escalated" and answer.text == replies.ESCALATED_WITHOUT_TICKET
            assert "human agent" not in answer.text.split(",")[0] and "could not open a case" in answer.text
            state = await client.state(cid)
            assert state.ended_reason.endswith("no ticket could be opened")
            assert any("opening the ticket failed: the ticketing system" in r.reason for r in state.rejections)
            key = f"cancel_pending_order:{PENDING}:{cid}.t1"
            assert httpx.get(f"{urls['ticketing']}/tickets", params={"reference": f"escalate:{key}"}).json() == []
    finally:
        fleet.stop()


async def _yes_while_payments_vanish(client, fleet, urls, cid: str):
    """Confirm a cancel of PENDING; once payments holds the request unanswered, stop the
    service: returns the reply to the yes."""
    await client.start_conversation(cid)
    assert (await client.send_message(cid, f"my email is {EMAIL}, cancel {PENDING}")).awaiting_confirmation
    yes = asyncio.create_task(client.send_message(cid, "yes"))
    while httpx.get(f"{urls['payments']}/_faults").json().get("answer_after_timeout") != 1:
        await asyncio.sleep(0.05)
    await asyncio.to_thread(fleet.threads["payments"].stop)  # gone before it answers
    return await asyncio.wait_for(yes, 120)


CANCEL_BRAIN = [call("find_user_id_by_email", email=EMAIL), call("get_user_details", user_id=CUSTOMER),
                call("get_order_details", order_id=PENDING),
                call("cancel_pending_order", order_id=PENDING, reason="no longer needed")]
