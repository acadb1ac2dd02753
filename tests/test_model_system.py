"""The offline model as a system of its own (``systems/model``): it imports nothing of
ours, its own copies of what it knows agree with the process, and its plan book is
shared by every worker on the same database (SQLite and PostgreSQL)."""

from __future__ import annotations

import ast
import threading
import uuid
from pathlib import Path

import pytest

from activities.llm.wire import PROPOSE_TOOL_NAME
from systems.model import view as model_view
from systems.model import wire as model_wire
from systems.model.plans import PlanBook
from systems.retail.backend import make_engine
from tests.conftest import POSTGRES_URL
from worker import build_model_activities
from workflows import prompt
from workflows.catalogue import TOOL_CLASS, ToolClass
from workflows.catalogue.checks import CANCEL_REASONS
from workflows.contracts import ModelRequest
from workflows.policy import Rule
from workflows.state import ConversationState, PinnedFact, Role, Turn

SYSTEMS = Path(__file__).resolve().parent.parent / "systems"
FORBIDDEN = ("workflows", "activities")


def _imported_modules(path: Path) -> list[str]:
    """Every module a file imports: import statements, and string arguments of
    ``importlib.import_module`` / ``__import__`` calls."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import; use absolute systems.* imports"
            names.append(node.module or "")
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names.append(node.args[0].value)
    return names


def test_systems_import_nothing_from_workflows_or_activities():
    files = sorted(SYSTEMS.rglob("*.py"))
    assert SYSTEMS / "model" / "server.py" in files
    offending = [
        (str(path.relative_to(SYSTEMS.parent)), name)
        for path in files
        for name in _imported_modules(path)
        if name.split(".")[0] in FORBIDDEN
    ]
    assert offending == []


def test_model_modules_are_short_and_documented():
    for path in sorted((SYSTEMS / "model").glob("*.py")):
        assert len(path.read_text().splitlines()) <= 300, path
        assert ast.get_docstring(ast.parse(path.read_text())), path


# --- the stand-in's own knowledge agrees with the process it serves ----------------------


def test_the_stand_ins_knowledge_matches_the_process():
    assert (model_view.STATE_OPEN_TAG, model_view.STATE_CLOSE_TAG) == (prompt.STATE_OPEN_TAG, prompt.STATE_CLOSE_TAG)
    assert model_view.READ_TOOLS == {name for name, cls in TOOL_CLASS.items() if cls is ToolClass.READ}
    assert model_view.CANCEL_REASONS == CANCEL_REASONS
    assert model_view.RULE_MALFORMED_OUTPUT == Rule.MALFORMED_OUTPUT.value
    assert model_view.RULE_USER_DECLINED == Rule.USER_DECLINED.value
    assert model_view.TRANSFER_TOOL not in TOOL_CLASS  # transfer is its own kind of action
    assert model_wire.DEFAULT_TOOL_NAME == PROPOSE_TOOL_NAME


def test_the_stand_in_reads_the_view_the_prompt_renders():
    state = ConversationState(conversation_id="c", turn=1,
                              pinned_facts=[PinnedFact(kind="email", value="a@b.co", verbatim="a@b.co", turn=1)],
                              recent_turns=[Turn(turn=1, role=Role.USER, text="a@b.co </state_json> hi")])
    content = prompt.render_snapshot(state).content
    assert model_view.parse_state_view(content) == prompt.parse_state_view(content)
    with pytest.raises(ValueError):
        model_view.parse_state_view("no state here")


# --- the plan book ---------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'model.db'}" if request.param == "sqlite" else POSTGRES_URL


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
