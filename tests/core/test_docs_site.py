"""The documentation: README.md is a short front door whose first commands are the two that work
on a fresh machine, docs/ is an MkDocs site that builds with --strict (every page in the nav, no
broken link or anchor). That neither tells the project's history is tests/core/test_no_history.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"
MKDOCS = Path(sys.executable).parent / "mkdocs"

README_MAX_LINES = 150
SHELL_FENCES = {"bash", "sh", "shell", "console"}


def _shell_commands(markdown: str) -> list[str]:
    """The command lines of the fenced shell blocks, in order (comments and blank lines left out)."""
    commands, fence = [], None
    for line in markdown.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = None if fence is not None else (stripped[3:].strip() or "text")
            continue
        if fence in SHELL_FENCES and stripped and not stripped.startswith("#"):
            commands.append(stripped)
    return commands


def test_the_readme_is_at_most_150_lines() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, len(lines)


def test_the_readme_first_commands_are_make_demo_and_make_test() -> None:
    commands = _shell_commands(README.read_text())
    assert [c.split("#")[0].strip() for c in commands[:2]] == ["make demo", "make test"], commands[:2]


def test_the_readme_links_into_the_docs_site() -> None:
    text = README.read_text()
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)", text))
    pages = {p.name for p in DOCS.glob("*.md")}
    assert linked and linked <= pages, linked - pages
    assert linked == pages, f"pages the README does not link: {sorted(pages - linked)}"


def test_every_docs_page_is_in_the_nav() -> None:
    nav = re.findall(r"^\s+- [^:\n]+: ([\w/-]+\.md)\s*$", (REPO / "mkdocs.yml").read_text(), re.MULTILINE)
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages, (nav, pages)


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    assert MKDOCS.exists(), f"{MKDOCS} is missing: mkdocs is in the test extra (make venv installs it)"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([str(MKDOCS), "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=REPO,
                          capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    for page in ("index", "concepts", "api", "operators", "production", "security", "recovery", "performance",
                 "releasing", "testing"):
        built = tmp_path / "site" / ("index.html" if page == "index" else f"{page}/index.html")
        assert built.is_file(), page
