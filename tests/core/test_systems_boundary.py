"""``systems/`` simulates external systems: it must not import statekeeper's own code.

Walks every module under ``systems/`` with ``ast`` (no import is executed) and fails on
any ``import``/``from ... import`` of ``workflows`` or ``activities`` at any depth
(inside functions too), and on ``importlib.import_module``/``__import__`` of a literal
name in them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SYSTEMS = Path(__file__).resolve().parents[2] / "systems"
FORBIDDEN = ("workflows", "activities")


def forbidden_imports(path: Path) -> list[str]:
    """``"line: module"`` for every import of a forbidden top-level package in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        elif isinstance(node, ast.Call) and _dynamic_import(node.func) and node.args:
            first = node.args[0]
            modules = [first.value] if isinstance(first, ast.Constant) and isinstance(first.value, str) else []
        else:
            continue
        found += [f"{node.lineno}: {m}" for m in modules if m.split(".")[0] in FORBIDDEN]
    return sorted(found, key=lambda entry: int(entry.split(":")[0]))


def _dynamic_import(func: ast.expr) -> bool:
    return (isinstance(func, ast.Name) and func.id in ("__import__", "import_module")) or (
        isinstance(func, ast.Attribute) and func.attr == "import_module"
    )


MODULES = sorted(SYSTEMS.rglob("*.py"))


def test_systems_has_modules() -> None:
    assert SYSTEMS / "__init__.py" in MODULES and SYSTEMS / "retail" / "__init__.py" in MODULES


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SYSTEMS)))
def test_systems_import_nothing_of_statekeeper(path: Path) -> None:
    assert forbidden_imports(path) == [], f"{path} imports statekeeper code"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SYSTEMS)))
def test_systems_use_absolute_imports(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    relative = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
    assert relative == [], f"{path}: relative import; use absolute systems.* imports"


def test_the_check_catches_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import os\nimport workflows.domain.actions\nfrom activities.tools import x\n"
        "def f():\n    from workflows import policy\nfrom systems.retail import load_data\n"
        "import importlib\nimportlib.import_module('activities.llm')\n"
    )
    assert forbidden_imports(module) == [
        "2: workflows.domain.actions", "3: activities.tools", "5: workflows", "8: activities.llm",
    ]


def test_statekeeper_and_the_system_agree_on_their_copies() -> None:
    """The system keeps its own copies (tool classes, cancel reasons); statekeeper's
    model-facing catalogue must say the same about every tool it offers."""
    from systems.retail import tools as system
    from workflows import catalogue
    from workflows.catalogue.checks import CANCEL_REASONS

    assert {n: c.value for n, c in catalogue.TOOL_CLASS.items()} == {
        n: system.TOOL_CLASS[n].value for n in catalogue.TOOL_CLASS
    }
    assert set(catalogue.TOOL_CLASS) <= set(system.TOOLS)
    assert CANCEL_REASONS == system.CANCEL_REASONS
