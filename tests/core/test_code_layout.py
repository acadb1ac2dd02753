"""How the production code is laid out, and what of it ships:

- a folder is a role, a module a concept: every production module says what it is for (a
  module docstring), and no folder holds more than 15 modules directly (more wants subpackages);
- the import contracts of ``pyproject.toml`` (``[tool.importlinter]``), checked by import-linter:
  systems import nothing of statekeeper; workflow code imports no I/O library, activity, starter
  or settings; the pure domain knows no workflow; activities never import starters; settings
  import nothing of ours; starters sit over activities over workflows; the conversation package
  is layered; no two sibling packages import each other. Each contract is also shown to fail on a planted wrong-way import;
- what ``pip install .`` ships (the production image installs the package that way, not
  editable): every folder of production code. A package missing from it fails the image's
  ``statekeeper worker`` or ``uvicorn starter.api:app`` with ``ModuleNotFoundError``, which an
  editable install hides (its finder serves the source tree).
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from setuptools import find_packages


# --- Modules and folders ---

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTED_FOLDERS = ("workflows", "activities", "systems", "starter", "settings", "bench")
MODULES = sorted(p for folder in DOCUMENTED_FOLDERS for p in (ROOT / folder).rglob("*.py")
                 if "migrations" not in p.parts)
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


# --- Import contracts ---

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
PACKAGES = ("workflows", "activities", "starter", "systems", "settings")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=120)


def test_the_contracts_hold():
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    """The packages and the contracts, copied: a planted import changes only the copy."""
    root = tmp_path_factory.mktemp("tree")
    for name in PACKAGES:
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


PLANTED = {
    "systems are the far side": ("systems/retail/planted.py", "import workflows.domain.money\n"),
    "workflow code is deterministic": ("workflows/domain/planted.py", "import sqlalchemy\n"),
    "the pure domain": ("workflows/domain/planted.py", "from workflows.conversation import turn\n"),
    "activities never import starters": ("activities/planted.py", "import starter.client.errors\n"),
    "settings import nothing": ("settings/planted.py", "import workflows.options\n"),
    "layers": ("workflows/planted.py", "import activities.tools\n"),
    "no cycles between sibling packages": ("starter/runtime/planted.py", "import starter.cli.app\n"),
}


@pytest.mark.parametrize("contract", sorted(PLANTED))
def test_a_planted_wrong_way_import_breaks_its_contract(copy: Path, contract: str):
    relative, source = PLANTED[contract]
    planted = copy / relative
    planted.write_text(f'"""A wrong-way import, planted."""\n{source}')
    try:
        done = lint_imports(copy)
    finally:
        planted.unlink()
    assert done.returncode != 0
    broken = done.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken, done.stdout[-3000:]


def test_an_import_up_the_conversation_layers_breaks_them(copy: Path):
    """A lower module of the conversation package importing a higher one (cancellation → turn)
    is refused by the layers contract of ``workflows.conversation``."""
    lower = copy / "workflows" / "conversation" / "cancellation.py"
    source = lower.read_text()
    lower.write_text(source + "\nfrom workflows.conversation import turn  # noqa: E402  (planted)\n")
    try:
        done = lint_imports(copy)
    finally:
        lower.write_text(source)
    assert done.returncode != 0
    assert "the conversation package is layered" in done.stdout.split("Broken contracts", 1)[-1], done.stdout[-3000:]


# --- What pip install ships ---

INSTALLED_FOLDERS = ("workflows", "activities", "systems", "starter")


def _shipped() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = config.get("packages", [])
    if isinstance(packages, list):
        return set(packages)
    find = packages["find"]
    return set(find_packages(where=str(ROOT / find.get("where", ["."])[0]), include=find.get("include", ["*"]),
                             exclude=find.get("exclude", ())))


def _package_data() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"].get("package-data", {})


def test_every_folder_of_production_code_is_installed():
    shipped, data = _shipped(), _package_data()
    missing = []
    for folder in INSTALLED_FOLDERS:
        for directory in sorted({p.parent for p in (ROOT / folder).rglob("*.py")}):
            dotted = ".".join(directory.relative_to(ROOT).parts)
            if dotted in shipped:
                continue
            # a folder without __init__.py (Alembic's migrations) ships as its parent's package data
            parent = next((p for p in sorted(shipped, key=len, reverse=True) if dotted.startswith(p + ".")), None)
            relative = dotted[len(parent) + 1:].replace(".", "/") if parent else ""
            if parent and any(pattern.startswith(relative + "/") for pattern in data.get(parent, [])):
                continue
            missing.append(dotted)
    assert not missing, f"pip install . would leave out: {missing}"


def test_the_worker_and_the_api_modules_are_installed():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "worker" in config["py-modules"]
    assert {"settings", "activities.erasure", "activities.store", "systems.service_kit", "systems.payments", "starter",
            "starter.api", "starter.runtime", "workflows.domain", "workflows.conversation"} <= _shipped()
