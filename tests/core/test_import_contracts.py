"""The import contracts of ``pyproject.toml`` (``[tool.importlinter]``), checked by import-linter:
systems import nothing of statekeeper; workflow code imports no I/O library, activity, starter
or settings; the pure domain knows no workflow; activities never import starters; settings
import nothing of ours; starters sit over activities over workflows; the conversation package
is layered (no import cycle inside it); no two sibling packages import each other. Each contract is also shown to fail on a planted wrong-way import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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


def test_an_import_up_the_conversation_layers_breaks_them(copy: Path):
    """approvals → cancellation → turn → approvals was a cycle: a lower module of the
    conversation package importing a higher one is refused."""
    lower = copy / "workflows" / "conversation" / "cancellation.py"
    source = lower.read_text()
    lower.write_text(source + "\nfrom workflows.conversation import turn  # noqa: E402  (planted)\n")
    try:
        done = lint_imports(copy)
    finally:
        lower.write_text(source)
    assert done.returncode != 0
    assert "the conversation package is layered" in done.stdout.split("Broken contracts", 1)[-1], done.stdout[-3000:]


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
