"""Every regular expression of the project is ASCII-only where it matters: a pattern with
``\\d``, ``\\w``, ``\\s`` or ``\\b`` (or case-insensitive) is compiled with ``re.ASCII``,
and no pydantic ``pattern=`` uses those classes (pydantic's engine is Unicode-aware too).

Issue 10: ``\\d`` in the id patterns and fact regexes accepted full-width and other Unicode
digits, so "#W４５６６８０９" was pinned as an order id. Fixing the one pattern was not
enough: this walks every module (``ast``; nothing is executed) so no new pattern brings
the kind back.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted(p for folder in ("workflows", "starter", "activities", "systems", "settings")
                 for p in (ROOT / folder).rglob("*.py")) + [ROOT / "worker.py"]
RE_FUNCTIONS = {"compile", "search", "match", "fullmatch", "sub", "subn", "findall", "finditer", "split"}
UNICODE_CLASSES = re.compile(r"\\[dwsbDWSB]")
FLAG_POSITION = {"compile": 1, "search": 2, "match": 2, "fullmatch": 2, "findall": 2, "finditer": 2, "split": 3,
                 "sub": 4, "subn": 4}


def _names(node: ast.AST | None) -> set[str]:
    """Attribute and plain names in a flags expression (``re.ASCII | re.I`` → {ASCII, I})."""
    return {n.attr if isinstance(n, ast.Attribute) else n.id for n in ast.walk(node)
            if isinstance(n, (ast.Attribute, ast.Name))} if node is not None else set()


def _pattern_text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):  # an f-string: its literal parts
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return None


def unicode_patterns(path: Path) -> list[str]:
    """``"line: pattern"`` for every regex in ``path`` that a Unicode digit, letter or space
    could satisfy: ``re.X(pattern, ...)`` with those classes or IGNORECASE but without
    ``re.ASCII``, and ``pattern=`` keywords (pydantic, FastAPI) with those classes."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "re" \
                and func.attr in RE_FUNCTIONS and node.args:
            pattern = _pattern_text(node.args[0])
            if pattern is None:
                continue
            position = FLAG_POSITION[func.attr]
            flags = node.args[position] if len(node.args) > position else next(
                (k.value for k in node.keywords if k.arg == "flags"), None)
            names = _names(flags)
            needs_ascii = UNICODE_CLASSES.search(pattern) or names & {"I", "IGNORECASE"}
            if needs_ascii and not names & {"A", "ASCII"}:
                found.append(f"{node.lineno}: {pattern}")
        for keyword in node.keywords:
            if keyword.arg == "pattern":
                pattern = _pattern_text(keyword.value)
                if pattern is not None and UNICODE_CLASSES.search(pattern):
                    found.append(f"{node.lineno}: pattern={pattern}")
    return found


def test_the_walk_finds_what_it_looks_for(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('import re\nA = re.compile(r"W\\d{7}")\nB = re.compile(r"[0-9]{7}")\n'
                      'C = re.search(r"\\bx", t, re.I)\nD = re.compile(r"\\s+", re.ASCII)\n'
                      'E = Field(pattern=r"^\\w+$")\n')
    assert unicode_patterns(sample) == ["2: W\\d{7}", "4: \\bx", "6: pattern=^\\w+$"]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_pattern_is_ascii(path: Path):
    assert unicode_patterns(path) == [], f"{path.relative_to(ROOT)}: compile with re.ASCII or use [0-9]/[A-Za-z]"
