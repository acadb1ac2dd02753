"""The offline model's plan book (``systems.model.plans.PlanBook``) on real SQLite and
PostgreSQL databases: shared by every worker on the same database, and the worker's
offline model follows a plan registered by another process.

The offline model's pure checks are tests/core/test_offline_model.py.
"""

from __future__ import annotations

import threading
import uuid

import pytest

from systems.model.plans import PlanBook
from systems.retail.backend import make_engine
from starter.runtime.worker import build_model_activities
from workflows.domain import prompt
from workflows.domain.contracts import ModelRequest
from workflows.domain.state import ConversationState, PinnedFact, Role, Turn


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'model.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_run_url")


PLAN = {"user": {"email": "a@b.co"}, "actions": [{"name": "cancel_pending_order",
                                                  "kwargs": {"order_id": "#W1", "reason": "no longer needed"}}]}


def test_plan_book_put_get_replace_delete(db_url):
    book = PlanBook(make_engine(db_url))
    book.create_schema()
    book.create_schema()  # idempotent
    cid = f"plan-{uuid.uuid4().hex}"
    assert book.get(cid) is None
    book.put(cid, PLAN)
    assert book.get(cid) == PLAN
    book.put(cid, {"actions": []})
    assert book.get(cid) == {"user": {}, "actions": []}
    other = PlanBook(make_engine(db_url))  # another process on the same database sees it
    assert other.get(cid) == {"user": {}, "actions": []}
    assert book.delete(cid) and other.get(cid) is None and not book.delete(cid)


@pytest.mark.parametrize("plan", [["x"], {"actions": "all"}, {"actions": [{"kwargs": {}}]}, {"user": "me"}])
def test_plan_book_refuses_plans_the_stand_in_cannot_follow(tmp_path, plan):
    book = PlanBook(make_engine(f"sqlite:///{tmp_path / 'model.db'}"))
    book.create_schema()
    with pytest.raises(ValueError):
        book.put("c", plan)
    with pytest.raises(ValueError):
        book.put("x" * 257, PLAN)


def test_plan_book_schema_and_puts_from_many_threads_at_once(db_url):
    cid = f"plan-{uuid.uuid4().hex}"
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            book = PlanBook(make_engine(db_url))
            book.create_schema()
            book.put(cid, {"actions": [{"name": "think", "kwargs": {"n": n}}]})
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert PlanBook(make_engine(db_url)).get(cid)["actions"][0]["name"] == "think"


async def test_the_workers_offline_model_follows_a_plan_registered_elsewhere(settings):
    """``build_model_activities`` wires the plan book on the worker's database: a plan put
    by another process (another engine) steers the model for that conversation only."""
    model = build_model_activities(settings)
    plan = {"user": {"email": "a@b.co"},
            "actions": [{"name": "find_user_id_by_name_zip",
                         "kwargs": {"first_name": "Ann", "last_name": "Bee", "zip": "12345"}}]}
    PlanBook(make_engine(settings.resolved_database_url())).put("tb-x-1", plan)
    state = ConversationState(conversation_id="tb-x-1", turn=1,
                              pinned_facts=[PinnedFact(kind="email", value="a@b.co", verbatim="a@b.co", turn=1)],
                              recent_turns=[Turn(turn=1, role=Role.USER, text="I'm a@b.co")])
    planned = await model.propose_action(ModelRequest(conversation_id="tb-x-1",
                                                      snapshot=prompt.render_snapshot(state)))
    assert planned.action.tool.name == "find_user_id_by_name_zip"  # the plan's own lookup
    state.conversation_id = "chat-1"
    chat = await model.propose_action(ModelRequest(conversation_id="chat-1", snapshot=prompt.render_snapshot(state)))
    assert chat.action.tool.name == "find_user_id_by_email"  # no plan: the chat rules
