"""The offline model as a system of its own (``systems/model``): it imports nothing of
ours, and its own copies of what it knows agree with the process.

Pure checks only; its plan book on real databases is tests/activities/test_plan_book.py.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from activities.llm.wire import PROPOSE_TOOL_NAME
from systems.model import view as model_view
from systems.model import wire as model_wire
from workflows import prompt
from workflows.catalogue import TOOL_CLASS, ToolClass
from workflows.catalogue.checks import CANCEL_REASONS
from workflows.policy import Rule
from workflows.state import ConversationState, PinnedFact, Role, Turn

SYSTEMS = Path(__file__).resolve().parents[2] / "systems"
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
    # the stand-in knows the benchmark's reads; a tool added to the catalogue later is one
    # it never proposes, but every tool it treats as a read must be a read
    assert model_view.READ_TOOLS <= {name for name, cls in TOOL_CLASS.items() if cls is ToolClass.READ}
    assert {"get_order_details", "get_user_details", "get_product_details"} <= model_view.READ_TOOLS
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
    assert model_view.parse_state_view(content) == json.loads(json.dumps(prompt.state_view(state)))
    with pytest.raises(ValueError):
        model_view.parse_state_view("no state here")
