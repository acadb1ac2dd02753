"""Small modules, one role each: no production module is over 300 lines, and each says
what it is for (a module docstring)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted(p for folder in ("workflows", "activities", "systems", "starter")
                 for p in (ROOT / folder).rglob("*.py"))


def test_the_folders_have_modules():
    assert len(MODULES) > 40


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_is_short_and_documented(path: Path):
    text = path.read_text()
    assert len(text.splitlines()) <= 300, f"{path.relative_to(ROOT)} has {len(text.splitlines())} lines"
    if path.name != "__init__.py" or text.strip():
        assert ast.get_docstring(ast.parse(text)), f"{path.relative_to(ROOT)} has no module docstring"
