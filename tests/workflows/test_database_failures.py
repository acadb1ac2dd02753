"""The system of record failing around writes; no conversation ever fails:

- when it becomes unreadable right after a refund commits, the refresh read's failure is a
  reply and the conversation stays active; when it refuses writes (so the escalation ticket
  cannot be written there either), the conversation escalates. SupportWorkflow on a real
  Temporal dev server, a real worker and SQLite, the fault injected through the tool port
  (``tests.faults``) or the database itself;
- a 12-second (and a 40-second, past every retry budget) outage (PostgreSQL refuses every
  connection) while eight confirmed requests run: each one ends executed (its ledger row
  applied and its step done) or escalated (a ticket in the ticketing service, the user told
  so); none is lost, and none is reported done without its ledger row. Retail on its own
  PostgreSQL database, tickets in the ticketing service over HTTP.

Only the model is faked, at its boundary (a scripted brain).
"""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
import sqlalchemy as sa

from starter.client.conversations import ConversationError
from tests.conftest import POSTGRES_URL
from tests.journal_fixtures import postgres_database
from tests.policy_fixtures import CUSTOMER, EMAIL, PENDING
from tests.service_fixtures import services  # noqa: F401 - fixture
from tests.workflow_harness import ListBrain, call, running_worker
from workflows.conversation.workflow import support_workflow_id
from workflows.domain import replies


# --- A read or a write refused around a refund ---

async def test_refresh_read_failure_after_a_refund_does_not_fail_the_conversation(temporal_env, settings,
                                                                                          tmp_path):
    """After a refund write commits, the workflow refreshes the user with a read. If that read
    cannot run, its failure becomes a reply like any read failure's: the conversation never
    FAILS (the user would get a 409 'has finished') with the write done. The fault: the store
    becomes unreadable right after the commit (the test's stand-in for a database outage)."""
    marker = tmp_path / "committed.marker"
    brain = ListBrain([
        call("find_user_id_by_email", email=EMAIL),
        call("get_user_details", user_id=CUSTOMER),
        call("get_order_details", order_id=PENDING),
        call("cancel_pending_order", order_id=PENDING, reason="no longer needed"),
    ])
    async with running_worker(temporal_env, settings, brain=brain, pause_after_write=(2.0, marker)) as (client, backend):
        cid = await client.start_conversation(f"refresh-fail-{uuid.uuid4().hex[:6]}")
        r = await client.send_message(cid, f"my email is {EMAIL}, cancel {PENDING}")
        assert r.awaiting_confirmation
        yes = asyncio.create_task(client.send_message(cid, "yes"))
        while not marker.exists():
            await asyncio.sleep(0.05)
        await asyncio.to_thread(backend.drop_store, "main")  # unreadable from now on
        try:
            result = await asyncio.wait_for(yes, 60)
        except ConversationError as err:
            desc = await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).describe()
            pytest.fail(f"the conversation ended as {desc.status.name} after an applied cancel: "
                        f"send_message raised {err.kind}: {err}")
        assert result.status in ("active", "escalated")


async def test_escalation_survives_a_database_that_refuses_writes(temporal_env, settings):
    """docs/concepts.md (Unknown outcomes): 'If a write's outcome cannot be shown after its retries, the conversation
    stops and escalates to a human (a ticket)'. The ticket lives in the same database as the
    write; when that database refuses writes (the very reason the write failed), open_ticket
    exhausts its retries, and the conversation is still ESCALATED, never FAILED."""
    settings = settings.model_copy(update={"write_timeout_seconds": 2.0})
    brain = ListBrain([
        call("find_user_id_by_email", email=EMAIL),
        call("get_user_details", user_id=CUSTOMER),
        call("get_order_details", order_id=PENDING),
        call("modify_pending_order_address", order_id=PENDING, address1="1 Main St", address2="",
             city="Austin", state="TX", country="USA", zip="78701"),
    ])
    async with running_worker(temporal_env, settings, brain=brain) as (client, backend):
        cid = await client.start_conversation(f"escalate-db-{uuid.uuid4().hex[:6]}")
        r = await client.send_message(cid, f"my email is {EMAIL}, change the address of {PENDING}")
        assert r.awaiting_confirmation
        # the database starts refusing inserts (a stand-in for a full disk / failing primary)
        with backend.engine.begin() as conn:
            for table in ("ledger", "tickets"):
                conn.exec_driver_sql(f"CREATE TRIGGER breaker_{table} BEFORE INSERT ON {table} "
                                     "BEGIN SELECT RAISE(ABORT, 'database refuses writes'); END")
        try:
            result = await asyncio.wait_for(client.send_message(cid, "yes"), 240)
        except ConversationError as err:
            desc = await temporal_env.client.get_workflow_handle(support_workflow_id(cid)).describe()
            pytest.fail(f"the conversation ended as {desc.status.name}, not escalated: {err.kind}: {err}")
        assert result.status == "escalated"


# --- An outage across eight confirmed requests ---

CITIES = ["Austin", "Boston", "Denver", "Fresno", "Tulsa", "Reno", "Omaha", "Salem"]


class PerConversation:
    """A brain per conversation (keyed by the conversation id in the view)."""

    def __init__(self) -> None:
        self.brains: dict[str, ListBrain] = {}

    def add(self, cid: str, city: str) -> None:
        self.brains[cid] = ListBrain([
            call("find_user_id_by_email", email=EMAIL), call("get_user_details", user_id=CUSTOMER),
            call("get_order_details", order_id=PENDING),
            call("modify_pending_order_address", order_id=PENDING, address1=f"1 {city} St", address2="",
                 city=city, state="TX", country="USA", zip="78701")])

    def __call__(self, view: dict, plan=None) -> dict:
        return self.brains[view["conversation_id"]](view, plan)


@pytest.mark.parametrize("seconds", [12.0, 40.0])
async def test_every_confirmed_request_is_executed_or_escalated_across_an_outage(temporal_env, settings,
                                                                                 services, seconds):  # noqa: F811
    with postgres_database() as url:
        name = sa.make_url(url).database
        settings = settings.model_copy(update={"database_url": url, "write_timeout_seconds": 5.0})
        brain = PerConversation()
        admin = sa.create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
        async with running_worker(temporal_env, settings, brain=brain, services=services) as (client, backend):
            cids = [f"outage-{i}-{uuid.uuid4().hex[:6]}" for i in range(len(CITIES))]
            for cid, city in zip(cids, CITIES):
                brain.add(cid, city)
                await client.start_conversation(cid)
                assert (await client.send_message(cid, f"my email is {EMAIL}, move {PENDING} to {city}")
                        ).awaiting_confirmation
            with admin.connect() as conn:  # the outage begins
                conn.exec_driver_sql(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
                conn.exec_driver_sql(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                     f"WHERE datname = '{name}' AND pid <> pg_backend_pid()")
            answers = asyncio.gather(*(client.send_message(cid, "yes") for cid in cids))
            await asyncio.sleep(seconds)
            with admin.connect() as conn:  # and ends
                conn.exec_driver_sql(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
            replies_ = await asyncio.wait_for(answers, 180)
            applied = {e["idempotency_key"] for e in backend.ledger_entries("main") if e["ok"]}
            outcomes = []
            for cid, answer in zip(cids, replies_):
                state = await client.state(cid)
                step = next(s for s in state.steps if s.name == "modify_pending_order_address")
                outcomes.append(step.status.value)
                key = f"modify_pending_order_address:{PENDING}:{cid}.t1"
                if step.status.value == "done":
                    assert key in applied  # never told done unless it is
                else:
                    assert step.status.value == "unknown" and answer.text == replies.ESCALATED
                    assert state.status.value == "escalated"
                    tickets = httpx.get(f"{services['ticketing']}/tickets",
                                        params={"reference": f"escalate:{key}"}).json()
                    assert len(tickets) == 1
            print(f"outcomes across a {seconds:.0f} s outage:", sorted(outcomes))
            if seconds > 30:  # longer than every retry budget: the escalation path was taken
                assert "unknown" in outcomes
            backend.engine.dispose()
        admin.dispose()
