"""A folder is a role, a module a concept: every production module says what it is for (a
module docstring), and no folder holds more than 15 modules directly (more wants subpackages)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("workflows", "activities", "systems", "starter", "settings", "bench")
MODULES = sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py") if "migrations" not in p.parts)
MOST_MODULES_IN_A_FOLDER = 15


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_is_documented(path: Path):
    text = path.read_text()
    if path.name != "__init__.py" or text.strip():
        assert ast.get_docstring(ast.parse(text)), f"{path.relative_to(ROOT)} has no module docstring"


def test_no_folder_is_crowded():
    folders = {p.parent for p in MODULES}
    crowded = {str(f.relative_to(ROOT)): n for f in folders
               if (n := len([p for p in f.glob("*.py") if p.name != "__init__.py"])) > MOST_MODULES_IN_A_FOLDER}
    assert not crowded, f"folders over {MOST_MODULES_IN_A_FOLDER} modules: {crowded}"
