"""Limits on what a system of record's answer may bring into a conversation.

A read's result enters the workflow's history (the activity's result), the conversation's
state (folded into typed records, or kept as an observation) and every later prompt. The
system of record is not ours to trust: an order's item option may hold megabytes, an order
ten thousand items, a name a NUL or invisible tag characters. So every tool result is
bounded here, inside the activity, before it is returned:

- every string (values and keys) loses its control and invisible characters and is cut to
  ``MAX_TEXT_CHARS`` characters; a result that is plain text (not a JSON document) to
  ``MAX_FREE_TEXT_CHARS``;
- lists keep their first ``MAX_LIST_ITEMS`` items, objects their first ``MAX_OBJECT_KEYS``
  keys, and a value nested deeper than ``MAX_DEPTH`` levels is replaced by the cut marker;
- a cut string ends with ``CUT_MARK``; a JSON document that was cut names what was cut in
  its ``"cut"`` list (JSON paths with what was kept, at most ``MAX_CUT_PATHS`` of them), so
  the model and whoever reads the state know the record is incomplete;
- a result still over ``MAX_RESULT_BYTES`` (UTF-8) once cut, or a JSON document that cannot
  be parsed (nested too deeply for the parser, a number of thousands of digits), is not
  used: ``RecordTooLarge``, which the tool activity reports as a refused read the model
  sees ("Error: the record cannot be used: ..."), never a failed workflow task.

A result within every limit is returned byte for byte as the system wrote it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from workflows.domain.records import (
    CUT_PATH_CHARS,
    CUT_PATHS_KEPT,
    RECORD_DEPTH,
    RECORD_FREE_TEXT_CHARS,
    RECORD_LIST_ITEMS,
    RECORD_OBJECT_KEYS,
    RECORD_RESULT_BYTES,
    RECORD_TEXT_CHARS,
)
from workflows.domain.user_text import LAYOUT_CONTROLS, visible_text

MAX_TEXT_CHARS = RECORD_TEXT_CHARS
"""Longest string of a JSON document (a value or a key), in characters (200)."""
MAX_FREE_TEXT_CHARS = RECORD_FREE_TEXT_CHARS
"""Longest plain-text result (not a JSON document), in characters (2000)."""
MAX_LIST_ITEMS = RECORD_LIST_ITEMS
MAX_OBJECT_KEYS = RECORD_OBJECT_KEYS
MAX_DEPTH = RECORD_DEPTH
"""Items of a list (100), keys of an object (100), deepest nesting kept (8: the document
itself is depth 0, its fields' values depth 1)."""
MAX_RESULT_BYTES = RECORD_RESULT_BYTES
"""Largest result, in UTF-8 bytes, once cut (32 KB)."""
MAX_CUT_PATHS = CUT_PATHS_KEPT - 1
"""At most this many entries in a document's ``"cut"`` list (then a count of the rest), each
at most ``CUT_PATH_CHARS`` characters."""
CUT_MARK = "…[cut]"
"""Ends every cut string; replaces every value nested too deeply."""
CUT_KEY = "cut"
"""The key of the list naming what was cut, added to a cut JSON document."""

_SCAN_FACTOR = 8
"""How much of a long string is scanned for visible text (``limit`` times this): the rest
is cut unread, so a 3 MB field costs what a 2 KB one does."""
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff" + LAYOUT_CONTROLS + "]+")


class RecordTooLarge(ValueError):
    """A result that cannot be used even when cut (over ``MAX_RESULT_BYTES``) or that cannot
    be read at all; the message says which, with sizes, never the content."""


@dataclass
class Bounded:
    """A result within the limits: ``text`` (the result as returned) and ``cut`` (the paths
    cut, empty when ``text`` is the system's own text; a string cut for invisible characters
    only is not listed: nothing was lost that a reader could see)."""

    text: str
    cut: list[str] = field(default_factory=list)


def clean_text(value: str, limit: int = MAX_TEXT_CHARS) -> tuple[str, bool]:
    """``value`` without control and invisible characters (``user_text.visible_text``, plus
    every C0/C1 control, surrogate, separator and bidirectional control), cut to ``limit``
    characters ending with ``CUT_MARK``; and whether it was cut."""
    scanned = value[: limit * _SCAN_FACTOR]
    text = visible_text(_CONTROLS.sub("", scanned))
    if len(text) <= limit and len(scanned) == len(value):
        return text, False
    return text[: limit - len(CUT_MARK)] + CUT_MARK, True


class _Cutter:
    def __init__(self) -> None:
        self.cut: list[str] = []

    def note(self, path: str, what: str) -> None:
        self.cut.append(f"{path.lstrip('.') or '$'}: {what}"[:CUT_PATH_CHARS])

    def bound(self, value: Any, path: str, depth: int) -> Any:
        if isinstance(value, str):
            text, was_cut = clean_text(value)
            if was_cut:
                self.note(path, f"text cut to {MAX_TEXT_CHARS} characters")
            return text
        if isinstance(value, (list, dict)) and depth >= MAX_DEPTH:
            self.note(path, f"nested deeper than {MAX_DEPTH} levels, left out")
            return CUT_MARK
        if isinstance(value, list):
            if len(value) > MAX_LIST_ITEMS:
                self.note(path, f"first {MAX_LIST_ITEMS} of {len(value)} items kept")
            return [self.bound(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value[:MAX_LIST_ITEMS])]
        if isinstance(value, dict):
            if len(value) > MAX_OBJECT_KEYS:
                self.note(path, f"first {MAX_OBJECT_KEYS} of {len(value)} keys kept")
            out: dict[str, Any] = {}
            for key, item in list(value.items())[:MAX_OBJECT_KEYS]:
                name, key_cut = clean_text(str(key))
                if key_cut:
                    self.note(f"{path}.{name}", f"key cut to {MAX_TEXT_CHARS} characters")
                out[name] = self.bound(item, f"{path}.{name}", depth + 1)
            return out
        return value  # numbers, booleans, null


def bound_result(text: str) -> Bounded:
    """``text`` (a tool's result: a JSON document, a plain value or ``"Error: ..."``) within
    the limits of this module. Raises ``RecordTooLarge``."""
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError) as err:
            raise RecordTooLarge(f"the record of {len(text.encode('utf-8', 'surrogatepass'))} bytes could not be "
                                 f"read ({type(err).__name__})") from None
        cutter = _Cutter()
        bounded = cutter.bound(doc, "", 0)
        if bounded == doc and not cutter.cut:
            out, cut = text, []
        else:
            cut = cutter.cut
            if cut and isinstance(bounded, dict):
                shown = cut[:MAX_CUT_PATHS]
                if len(cut) > MAX_CUT_PATHS:
                    shown.append(f"and {len(cut) - MAX_CUT_PATHS} more")
                bounded[CUT_KEY] = shown
            out = json.dumps(bounded)
    else:
        out, was_cut = clean_text(text, MAX_FREE_TEXT_CHARS)
        cut = [f"$: text cut to {MAX_FREE_TEXT_CHARS} characters"] if was_cut else []
    size = len(out.encode("utf-8"))
    if size > MAX_RESULT_BYTES:
        raise RecordTooLarge(f"the record is {size} bytes once cut to the limits; the limit is "
                             f"{MAX_RESULT_BYTES} bytes")
    return Bounded(out, cut)


def too_large_result(reason: str) -> str:
    """The refusal a tool activity returns for a ``RecordTooLarge`` result, as the model reads it."""
    return f"Error: the record cannot be used: {reason}; it cannot be shown or changed here"


def skeleton(bounded_text: str, reason: str) -> str:
    """The top-level plain values (ids, status) of a JSON document whose cut form is still too
    large, with ``"cut"`` saying everything else was left out: what an applied write returns
    then (it took effect; only its answer is shortened). ``bounded_text`` is the document as
    the system wrote it; anything not a JSON object becomes ``{"cut": [...]}``."""
    try:
        doc = json.loads(bounded_text)
    except (ValueError, RecursionError):
        doc = None
    kept: dict[str, Any] = {}
    if isinstance(doc, dict):
        for key, value in list(doc.items())[:MAX_OBJECT_KEYS]:
            if isinstance(value, (str, int, float, bool)) or value is None:
                kept[clean_text(str(key))[0]] = clean_text(value)[0] if isinstance(value, str) else value
    kept[CUT_KEY] = [f"$: only the plain fields kept, {reason}"]
    return json.dumps(kept)
