"""Hostile input as a kind, in the pure code: fact pinning, confirmation matching, the
message rule, the body guard, the offline model's view parsing and the generic failure
reasons take any text or JSON without raising, recursing or accepting what is not ASCII;
and every regular expression of the project is ASCII-only where it matters (a pattern with
``\\d``, ``\\w``, ``\\s`` or ``\\b``, or case-insensitive, is compiled with ``re.ASCII``, and no
pydantic ``pattern=`` uses those classes: pydantic's engine is Unicode-aware too), checked by
walking every module's syntax tree so that no new pattern accepts full-width digits.

Property-based (hypothesis) with a fixed derandomized seed and a bounded number of
examples, so a run is the same every time and costs a few seconds; plus a plain test for
each crafted message: the nested ``<script>`` message, full-width digits, NUL, SQL text in a
failure.
"""

from __future__ import annotations

import ast
import json
import re
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from temporalio.exceptions import ActivityError, ApplicationError, RetryState

from starter.api.body_guard import MAX_JSON_DEPTH, body_problem, json_depth
from systems.model.view import parse_state_view
from systems.retail.tools.read import calculate
from workflows.domain.facts import MAX_FACTS_PER_KIND_PER_MESSAGE, extract_facts
from workflows.domain.money import money
from workflows.domain.policy.confirm import MAX_CONFIRMATION_CHARS, is_no, is_yes
from workflows.domain.user_text import MAX_USER_MESSAGE_BYTES, control_problem, message_problem
from workflows.failures import MODEL, ORDER_SYSTEM, public_reason, redact


BOUNDED = settings(max_examples=150, derandomize=True, database=None, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow])
"""The same examples on every run (derandomize), no example database, at most 150 each."""

NESTED_SCRIPT = "<script>" + "[" * 1200 + "]" * 1200 + "</script>"
"""A crafted message: legal (2.4 KB) and nested deeper than Python's recursion limit."""
ID_KINDS = {"order_id", "payment_method_id", "item_id", "user_id", "zip"}

# text that looks like what the patterns look for, mixed with anything
_PIECES = st.sampled_from(["#W", "W", "#", "_", "@", ".", " ", "my name is ", "i'm ", "credit_card_", "gift_card_",
                           "[", "]", "{", "}", "<script>", "\x00", "\u00a0", "yes", "no", "４", "٣", "७", "1234567",
                           "12345", "1234567890", "example.com", "raj_sanchez_", "\u212a", "\u017f", "\u202e", "\u2028", "\u2066"])
HOSTILE_TEXT = st.one_of(st.text(max_size=400), st.lists(st.one_of(_PIECES, st.text(max_size=5)), max_size=80)
                         .map("".join))


def _is_refused_char(char: str) -> bool:
    """The reference definition of a refused character: a control (Cc) other than tab, LF
    and CR, a surrogate (Cs), a line or paragraph separator (Zl, Zp), or a bidirectional
    embedding, override or isolate (the Cf characters whose bidi class is LRE, RLE, PDF, LRO,
    RLO, LRI, RLI, FSI or PDI)."""
    category = unicodedata.category(char)
    return ((category == "Cc" and char not in "\t\n\r") or category in ("Cs", "Zl", "Zp")
            or unicodedata.bidirectional(char) in ("LRE", "RLE", "PDF", "LRO", "RLO", "LRI", "RLI", "FSI", "PDI"))


# --- fact pinning ------------------------------------------------------------------------


@BOUNDED
@given(HOSTILE_TEXT)
def test_fact_pinning_takes_any_text(text):
    facts = extract_facts(text, 3)
    kinds = [f.kind for f in facts]
    assert all(kinds.count(k) <= MAX_FACTS_PER_KIND_PER_MESSAGE for k in set(kinds))
    for fact in facts:
        assert fact.verbatim in text and fact.turn == 3 and len(fact.verbatim) <= 300
        if fact.kind in ID_KINDS:
            assert fact.value.isascii() and fact.verbatim.isascii(), fact  # never full-width or other digits


def test_the_nested_script_message_is_pinned_without_recursion():
    """A legal 2.4 KB message with a deeply nested <script>[[[…]]]</script> raises no
    RecursionError in fact pinning (which would fail the workflow task). Pinning is linear
    regular expressions: the nesting is text, whatever its depth (here past json's limit)."""
    with pytest.raises(RecursionError):
        json.loads(NESTED_SCRIPT[len("<script>"):-len("</script>")])  # what a recursive walker hits
    deeper = "<script>" + "[" * 4000 + "]" * 4000 + "</script>"
    assert extract_facts(NESTED_SCRIPT, 1) == [] and extract_facts(deeper, 1) == []
    facts = extract_facts(f"order #W4566809 {NESTED_SCRIPT} my email is a.b@example.com", 2)
    assert {(f.kind, f.value) for f in facts} == {("order_id", "#W4566809"), ("email", "a.b@example.com")}


@pytest.mark.parametrize("digits", ["４５６６８０９", "٤٥٦٦٨٠٩", "४५६६८०९", "4566８09"])
def test_ids_with_non_ascii_digits_are_not_pinned(digits):
    """"#W４５６６８０９" is not pinned (\\d would match any Unicode digit, and the conversation
    would keep failing on an id no system holds). Only ASCII digits make an id."""
    text = f"please cancel #W{digits}, zip {digits[:5]}, item {digits}{digits[:3]}, paypal_{digits}"
    assert extract_facts(text, 1) == []
    assert [f.value for f in extract_facts("please cancel #W4566809", 1)] == ["#W4566809"]


def test_names_are_ascii_letters_only():
    # under re.IGNORECASE without re.ASCII, [a-z] also matches the Kelvin sign and the long s
    assert extract_facts("my name is \u212aelvin Smith", 1) == []
    assert [f.value for f in extract_facts("my name is Kelvin Smith", 1)] == ["Kelvin Smith"]


# --- confirmation matching and the message rule ------------------------------------------


@BOUNDED
@given(HOSTILE_TEXT)
def test_confirmation_matching_takes_any_text(text):
    yes, no = is_yes(text), is_no(text)
    assert not (yes and no)
    if yes or no:
        assert len(text) <= MAX_CONFIRMATION_CHARS and not any(_is_refused_char(c) for c in text.strip())


def test_a_long_or_nested_message_is_neither_yes_nor_no():
    assert is_yes("Yes!") and is_no("no thanks.")
    assert not is_yes("yes" + "!" * 5000) and not is_yes(NESTED_SCRIPT) and not is_yes("yes\x00")


@BOUNDED
@given(st.text(max_size=200))
def test_the_message_rule_refuses_exactly_the_control_characters(text):
    refused = any(_is_refused_char(c) for c in text)
    assert (control_problem(text) is not None) == refused
    problem = message_problem(text)
    if not text.strip():
        assert problem == "message text is empty"
    elif refused:
        assert problem is not None and "U+" in problem and text not in problem  # names the code point, not the text
    else:
        assert problem is None  # 200 characters are at most 800 bytes


def test_nul_is_refused_naming_its_position():
    assert message_problem("hello\x00there") == ("the message contains a control character (U+0000 at position 5); "
                                                 "send plain text without control characters")
    assert "unpaired surrogate" in message_problem("hi \ud800")
    assert "bidirectional text control (U+202E at position 6)" in message_problem("note: \u202etxt.exe")
    assert "line separator (U+2028" in message_problem("one\u2028two")
    assert message_problem("left\u200eright mark and \u00a0 spaces are text") is None
    assert message_problem("tabs\tand\r\nnewlines are text") is None
    assert "8192" in message_problem("é" * (MAX_USER_MESSAGE_BYTES // 2 + 1))


# --- bounded parsing of JSON -------------------------------------------------------------

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=40)


def _depth(value) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


@BOUNDED
@given(JSON)
def test_json_depth_is_the_documents_depth(value):
    text = json.dumps(value)
    assert json_depth(text) == _depth(value)
    assert body_problem(text.encode()) is None or _depth(value) > MAX_JSON_DEPTH


@BOUNDED
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_the_body_guard_takes_any_bytes(body):
    problem = body_problem(body)
    assert problem is None or problem.startswith("invalid request: ")


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 5000])
def test_deep_json_is_refused_without_parsing_it(depth):
    for opener, closer in (("[", "]"), ('{"a":', "}")):
        body = (opener * depth + "1" + closer * depth).encode()
        assert "deeper than" in body_problem(body)
    assert body_problem(json.dumps({"text": NESTED_SCRIPT}).encode()) is None  # brackets in a string are text


def test_invalid_utf8_and_raw_controls_are_refused():
    assert "not valid UTF-8" in body_problem(b'{"text": "\xff\xfe"}')
    assert "raw control character (U+0000" in body_problem(b'{"text": "a\x00b"}')
    assert "raw control" in body_problem('{"text": "hi"}'.encode("utf-16-le"))  # UTF-16 JSON looks like this


@BOUNDED
@given(HOSTILE_TEXT)
def test_the_offline_model_reads_any_content_or_says_why_not(text):
    for content in (text, f"<state_json>{text}</state_json>", "<state_json>" + "[" * 3000 + "</state_json>"):
        try:
            assert isinstance(parse_state_view(content), dict)
        except ValueError:
            pass  # the only refusal the server turns into a 400


def test_calculate_does_not_recurse_on_nesting():
    assert calculate({}, "-" * 499 + "1") == "-1.0"
    assert calculate({}, "+".join(["1"] * 250)) == "250.0"
    assert calculate({}, "(" * 60 + "2*3" + ")" * 60) == "6.0"


def test_money_is_written_in_ascii_digits():
    assert str(money("826.70")) == "826.70"
    with pytest.raises(ValueError):
        money("８２６.７０")


# --- generic failure reasons -------------------------------------------------------------

SQL_FAILURE = ('(psycopg.OperationalError) connection to server at "10.20.30.40", port 5432 failed: FATAL\n'
               "[SQL: SELECT doc FROM users WHERE email_lc = %(email)s]\n"
               "[parameters: {'email': 'raj.sanchez2046@example.com'}]\n"
               "(Background on this error at: https://sqlalche.me/e/20/e3q8)")


def _activity_error(cause: BaseException) -> ActivityError:
    err = ActivityError("activity failed", scheduled_event_id=1, started_event_id=2, identity="w",
                        activity_type="run_read_tool", activity_id="1", retry_state=RetryState.MAXIMUM_ATTEMPTS_REACHED)
    err.__cause__ = cause
    return err


def test_a_failure_is_worded_from_its_kind_never_from_its_text():
    """A rejection reason (stored in the state, shown to the model, returned by the API) comes
    from the failure's kind, never from its text, which may hold a whole SQL statement with its
    parameters, or hosts and ports; the text is only logged, redacted."""
    infrastructure = _activity_error(ApplicationError(SQL_FAILURE, type="OperationalError"))
    assert public_reason(infrastructure) == "the order system could not be reached"
    refused = _activity_error(ApplicationError(SQL_FAILURE, type="IdempotencyKeyConflict", non_retryable=True))
    assert public_reason(refused) == "the order system refused the change: this step already holds a different change"
    model = _activity_error(ApplicationError("model unavailable: ConnectError: [Errno 111] 10.0.0.1:443",
                                             type="ModelUnavailable"))
    assert public_reason(model, MODEL) == "the model could not be reached"
    malformed = _activity_error(ApplicationError("the response stopped before completing its tool call "
                                                 "(stop_reason='max_tokens')", type="MalformedModelOutput"))
    assert "stop_reason='max_tokens'" in public_reason(malformed, MODEL)
    for text in (public_reason(infrastructure, ORDER_SYSTEM), redact(SQL_FAILURE)):
        for secret in ("SELECT", "email_lc", "raj.sanchez2046", "parameters"):
            assert secret not in text
    assert redact("duplicate key (email_lc)=(a@b.example) DETAIL: Key exists") == "duplicate key '…'"


# --- every regular expression is ASCII-only where it matters ---

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


def test_the_invisible_class_covers_every_format_character_of_this_python():
    """``INVISIBLE`` is written out (a replayed workflow must not depend on the Python's Unicode
    tables); it must still cover every Cf character those tables know, and leave visible text."""
    import sys
    import unicodedata

    from workflows.domain.user_text import visible_text

    missed = [f"U+{cp:04X}" for cp in range(sys.maxunicode + 1)
              if unicodedata.category(chr(cp)) == "Cf" and visible_text(chr(cp)) != ""]
    assert missed == []
    assert visible_text("Grüße, #W4566809 — ok? 漢字 ١٢٣") == "Grüße, #W4566809 — ok? 漢字 ١٢٣"
    assert visible_text("a\u00a0b\u3000c\u2009d") == "a b c d"


def test_a_retry_without_its_invisible_characters_is_the_same_message():
    from workflows.domain.contracts import message_digest

    assert message_digest("yes\u200b") == message_digest("yes") == message_digest("\ufeffye\u00ads")
    assert message_digest("yes") != message_digest("no") and message_digest("a\u00a0b") == message_digest("a b")
