"""What ``pip install .`` ships (the production image installs the package that way, not
editable): every folder of production code the package is built from. The list of packages
in pyproject.toml left out ``activities.erasure``, ``systems.service_kit`` and the payments,
email and ticketing services, so the image's ``statekeeper worker`` and
``uvicorn starter.api:app`` failed with ``ModuleNotFoundError: No module named
'activities.erasure'`` (an editable install hides it: its finder serves the source tree)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("workflows", "activities", "systems", "starter")


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
    for folder in FOLDERS:
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
