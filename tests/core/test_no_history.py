"""No history in the repository: code, docs and tests say what is true now and what they cover,
never which issue, review or session led there. Every tracked ``.py``, ``.md``, ``.yml``/``.yaml``
and ``.toml`` file (README.md, docs/, mkdocs.yml, production code, tests) is scanned line by line
for an issue number, a review, a numbered session or a "before this fix" story."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SUFFIXES = {".py", ".md", ".yml", ".yaml", ".toml"}
HISTORY = re.compile(r"\bissue #?\d+|(adversarial|hostile|new-user) review|\b\d+(st|nd|rd|th) session\b"
                     r"|\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth) session\b"
                     r"|before this fix|README follower|a new user's report", re.IGNORECASE)
THIS_FILE = Path(__file__).resolve()
"""Left out of the scan: its pattern names what it looks for."""


def _tracked_files() -> list[Path]:
    """The files git tracks (outside ``.git`` by construction), or every file of the tree
    outside ``.git``, ``.venv`` and build output where there is no git."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60)
        paths = [REPO / name for name in listed.stdout.decode().split("\0") if name]
    except (OSError, subprocess.SubprocessError):
        skipped = {".git", ".venv", "site", "node_modules"}
        paths = [p for p in REPO.rglob("*") if not skipped & set(p.relative_to(REPO).parts)]
    return sorted(p for p in paths if p.suffix in SUFFIXES and p.is_file() and p.resolve() != THIS_FILE)


def test_no_history_in_tracked_files() -> None:
    files = _tracked_files()
    assert any(p.name == "README.md" for p in files) and any(p.suffix == ".toml" for p in files)
    found = [f"{path.relative_to(REPO)}:{n}: {line.strip()}"
             for path in files
             for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1) if HISTORY.search(line)]
    assert not found, "\n".join(found)


def test_the_history_pattern_catches_what_it_should() -> None:
    # written in two pieces so that the examples are not themselves a match for a plain grep
    for text in ("fixed in issue" + " 8", "see Issue" + " #12", "an adversarial" + " review found",
                 "the 14th" + " session's run", "the 2nd" + " session", "the eighth" + " session counted",
                 "as it was before" + " this fix", "Found by a hostile" + " review", "(README" + " follower: ...)",
                 "(a new user's" + " report)"):
        assert HISTORY.search(text), text
    for text in ("a session of its own", "issues a ticket", "the 20 dev tasks", "customer under review",
                 "held for review", 'scope="session"', "temporalio/sdk-python/issues/300"):
        assert not HISTORY.search(text), text
