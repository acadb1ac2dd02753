"""Read-before-write: a confirmed cancel runs only on the order the user confirmed. When the
order changes between the user's yes-prompt and the write (here its payment is adjusted by
another system, which the status guard alone would let through), nothing is written and the
user and the model are told; an unchanged order is cancelled as usual.

SupportWorkflow and its RefundWorkflow child on a real Temporal dev server and worker,
retail SQLite, the payments service over HTTP; the model is a scripted brain.
"""

from __future__ import annotations

import uuid

import httpx
import sqlalchemy as sa

from systems.retail.schema import Order
from tests.policy_fixtures import CUSTOMER, EMAIL, PENDING
from tests.service_fixtures import services  # noqa: F401 - fixture
from tests.workflow_harness import ListBrain, call, order_details, running_worker
from workflows.domain import replies
from workflows.domain.policy.read_before_write import CHANGED_REASON

_orders = Order.__table__


def _adjust_payment(backend, order_id: str) -> None:
    """Another system adjusts the order's single payment (the status stays ``pending``)."""
    with backend.engine.begin() as conn:
        doc = conn.execute(sa.select(_orders.c.doc).where(_orders.c.store == "main",
                                                           _orders.c.order_id == order_id)).scalar_one()
        doc = {**doc, "payment_history": [{**doc["payment_history"][0],
                                           "amount": doc["payment_history"][0]["amount"] - 10}]}
        conn.execute(_orders.update().where(_orders.c.store == "main", _orders.c.order_id == order_id)
                     .values(doc=doc))


def _brain() -> ListBrain:
    return ListBrain([call("find_user_id_by_email", email=EMAIL), call("get_user_details", user_id=CUSTOMER),
                      call("get_order_details", order_id=PENDING),
                      call("cancel_pending_order", order_id=PENDING, reason="no longer needed")])


async def test_an_order_changed_after_the_yes_prompt_is_not_written(temporal_env, settings, services):  # noqa: F811
    async with running_worker(temporal_env, settings, brain=_brain(), services=services) as (client, backend):
        cid = await client.start_conversation(f"rbw-{uuid.uuid4().hex[:6]}")
        assert (await client.send_message(cid, f"my email is {EMAIL}, cancel {PENDING}")).awaiting_confirmation
        _adjust_payment(backend, PENDING)
        answer = await client.send_message(cid, "yes")
        assert answer.text == replies.CHANGED_SINCE_CONFIRMED and answer.status == "active"
        assert order_details(backend, PENDING)["status"] == "pending"
        assert backend.ledger_entries("main") == []
        state = await client.state(cid)
        step = next(s for s in state.steps if s.name == "cancel_pending_order")
        assert step.status.value == "failed" and CHANGED_REASON in (step.error or "")
    assert httpx.get(f"{services['payments']}/operations", params={"reference": PENDING}).json() == []


async def test_an_unchanged_order_is_written(temporal_env, settings, services):  # noqa: F811
    async with running_worker(temporal_env, settings, brain=_brain(), services=services) as (client, backend):
        cid = await client.start_conversation(f"rbw-ok-{uuid.uuid4().hex[:6]}")
        assert (await client.send_message(cid, f"my email is {EMAIL}, cancel {PENDING}")).awaiting_confirmation
        answer = await client.send_message(cid, "yes")
        assert answer.status == "active" and answer.text != replies.CHANGED_SINCE_CONFIRMED
        assert order_details(backend, PENDING)["status"] == "cancelled"
    assert len(httpx.get(f"{services['payments']}/operations", params={"reference": PENDING}).json()) == 1


async def test_an_address_change_on_an_order_changed_after_the_yes_prompt_is_not_written(
        temporal_env, settings, services):  # noqa: F811
    brain = ListBrain([call("find_user_id_by_email", email=EMAIL), call("get_user_details", user_id=CUSTOMER),
                       call("get_order_details", order_id=PENDING),
                       call("modify_pending_order_address", order_id=PENDING, address1="1 Main St", address2="",
                            city="Austin", state="TX", country="USA", zip="78701")])
    async with running_worker(temporal_env, settings, brain=brain, services=services) as (client, backend):
        before = order_details(backend, PENDING)["address"]
        cid = await client.start_conversation(f"rbw-addr-{uuid.uuid4().hex[:6]}")
        assert (await client.send_message(cid, f"my email is {EMAIL}, move {PENDING}")).awaiting_confirmation
        _adjust_payment(backend, PENDING)
        answer = await client.send_message(cid, "yes")
        assert answer.text == replies.CHANGED_SINCE_CONFIRMED
        assert order_details(backend, PENDING)["address"] == before and backend.ledger_entries("main") == []
        state = await client.state(cid)
        # the model now sees the order as it is
        assert f"{state.orders[PENDING].payment_history[0].amount:.2f}" == \
            f"{order_details(backend, PENDING)['payment_history'][0]['amount']:.2f}"
