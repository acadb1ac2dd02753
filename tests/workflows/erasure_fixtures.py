"""Shared parts of the erasure and retention tests: a dev server of their own (retention
deletes every expired run of the namespace, so it must not see other tests' runs), real
conversations with writes, an email, a ticket and journal rows, and scans of every store."""

from __future__ import annotations

import asyncio
import json
from typing import Optional

import pytest
import sqlalchemy as sa
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from activities.store.journal import JournalStore
from starter.client.conversations import StatekeeperClient
from starter.runtime.connection import data_converter
from starter.dev.server import DEV_SERVER_STARTUP
from systems.model.server import offline_brain
from systems.retail.backend import RetailBackend
from tests.conftest import temporal_cli
from tests.policy_fixtures import CARD, CUSTOMER, DELIVERED, EMAIL, GIFT
from tests.workflow_harness import until
from workflows.options import SEARCH_ATTRIBUTES

OTHER, OTHER_EMAIL, OTHER_PENDING = "sofia_rossi_8776", "sofia.rossi2645@example.com", "#W5918442"
PERSONAL = (CUSTOMER, EMAIL, "Sanchez", "Sunset Drive", "92147", CARD, GIFT)
"""The customer's id (it holds the name), email, last name, street, zip and payment ids."""
OTHERS = (OTHER, OTHER_EMAIL, "Rossi", "River Road", OTHER_PENDING)
FAST_DELETION = ["--dynamic-config-value", 'history.transferProcessorUpdateAckInterval="1s"']
"""Temporal deletes a closed run once its transfer queue's ack level passes the close (30 s by
default); a 1 s ack interval makes deletions visible at once in tests."""


async def own_server() -> WorkflowEnvironment:
    """A dev server of the module's own, search attributes registered, fast deletions."""
    return await WorkflowEnvironment.start_local(
        dev_server_startup_timeout=DEV_SERVER_STARTUP,
        dev_server_existing_path=temporal_cli(), data_converter=data_converter(),
        search_attributes=list(SEARCH_ATTRIBUTES), dev_server_log_level="error", dev_server_extra_args=FAST_DELETION)


def transfer_on_request(view: dict, plan: Optional[dict] = None) -> dict:
    """The offline model, except that a user asking for a human is transferred (a ticket)."""
    said = [t["text"] for t in view["recent_turns"] if t["role"] == "user"]
    if said and "human" in said[-1].lower() and view.get("customer"):
        return {"kind": "transfer_to_human", "summary": "the customer asked for a human agent"}
    return offline_brain(view, plan)


async def return_then_transfer(client: StatekeeperClient, cid: str) -> None:
    """Raj authenticates, returns an order (a refund child, a ledger row, an email), then
    asks for a human (a ticket; the conversation closes)."""
    await client.start_conversation(cid)
    await client.send_message(cid, f"Hi, my email is {EMAIL}")
    asking = await client.send_message(cid, f"I want to return all items of order {DELIVERED}")
    assert asking.awaiting_confirmation, asking.text
    await client.send_message(cid, "yes")
    assert (await client.send_message(cid, "Thanks. I need a human now")).status == "transferred"


async def cancel_then_transfer(client: StatekeeperClient, cid: str, authenticate: str = OTHER_EMAIL) -> None:
    """Another customer cancels an order (a refund child, a ledger row) and asks for a human."""
    await client.start_conversation(cid)
    await client.send_message(cid, f"Hi, my email is {authenticate}")
    asking = await client.send_message(cid, f"Please cancel order {OTHER_PENDING}, I ordered it by mistake")
    assert asking.awaiting_confirmation, asking.text
    await client.send_message(cid, "yes")
    assert (await client.send_message(cid, "I need a human please")).status == "transferred"


async def journal_holds(journal: JournalStore, cid: str, entries: int) -> None:
    """Wait for a conversation's last turn record (written just after its reply)."""
    await until(lambda: len(journal.transcript(cid)) >= entries, f"{entries} transcript entries of {cid}")


def side_rows(backend: RetailBackend) -> list[str]:
    """Every ledger row, email and ticket of every store, each as JSON text."""
    with backend.engine.connect() as conn:
        return [json.dumps(dict(r._mapping), default=str, sort_keys=True) for t in ("ledger", "outbox", "tickets")
                for r in conn.execute(sa.text(f"SELECT * FROM {t} ORDER BY store"))]


def journal_rows(journal: JournalStore) -> list[str]:
    """Every row of the journal's tables, each as JSON text."""
    with journal.engine.connect() as conn:
        return [json.dumps(dict(r._mapping), default=str, sort_keys=True) for t in ("model_calls", "verdicts",
                                                                                     "transcript")
                for r in conn.execute(sa.text(f"SELECT * FROM {t} ORDER BY conversation_id"))]


def mentioning(rows: list[str], needles: tuple[str, ...]) -> list[str]:
    """The rows that mention any of ``needles`` (case-insensitive)."""
    return [r for r in rows if any(n.lower() in r.lower() for n in needles)]


async def exists(client: Client, workflow_id: str, run_id: Optional[str] = None) -> bool:
    """True while Temporal still returns the run's history; False once it is NOT_FOUND."""
    try:
        await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


async def gone(client: Client, workflow_ids: list[str], seconds: float = 30.0) -> None:
    """Wait until no history of ``workflow_ids`` can be fetched."""
    async def all_gone() -> bool:
        return not any(await asyncio.gather(*(exists(client, w) for w in workflow_ids)))
    await until(all_gone, f"deletion of {workflow_ids}", seconds)


@pytest.fixture(scope="module")
async def env():
    """The module's own dev server (``own_server``), shut down after the module."""
    server = await own_server()
    try:
        yield server
    finally:
        await server.shutdown()
