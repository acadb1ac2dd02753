"""What text from outside may contain: the one rule for user messages and other free text
(cancel reasons, approval notes), applied at every edge — the Python client, the HTTP API
and the ``send_message`` update validator — so each refuses the same text with the same words.

A message is refused when it is empty (only whitespace), over ``MAX_USER_MESSAGE_BYTES``
of UTF-8, or carries a control character: C0 and C1 controls (NUL, ESC, ...) other than
tab, line feed and carriage return, lone surrogates (not encodable as UTF-8), the line and
paragraph separators U+2028/U+2029, and the bidirectional embedding, override and isolate
controls U+202A-U+202E, U+2066-U+2069 (they reorder how text after them is displayed: a note
reading one thing in the Web UI and another in the log). Control characters have no meaning
in a chat message and break what later reads the text (logs, terminals, the model's input,
search attributes); refusing them at the edge keeps them out of the state and the history.

Invisible characters are not refused but removed (``visible_text``): every format character
(Unicode category Cf: zero-width spaces and joiners, the byte order mark, the soft hyphen, the
tag block U+E0000-U+E007F), the variation selectors, the combining grapheme joiner and the
blank fillers of Hangul, Khmer and Braille. They show nothing, so what a person reads is the
text without them; kept, they make "yes" with a zero-width space differ from "yes" and carry
hidden instructions to the model. Unusual spaces (no-break, en, em, ideographic: category Zs)
become a plain space. The workflow stores a message's visible text; a message with no visible
character is refused ("message text has no visible characters").
Pure: imported inside the workflow sandbox.
"""

from __future__ import annotations

import re
from typing import Optional

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError


MAX_USER_MESSAGE_BYTES = 8 * 1024
"""The largest user message, in UTF-8 bytes."""

LAYOUT_CONTROLS = r"\u2028\u2029\u202a-\u202e\u2066-\u2069"
"""Regex class body of the refused separators and bidirectional controls (for patterns)."""
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff" + LAYOUT_CONTROLS + "]")
"""A character refused in free text: C0/C1 controls except tab, LF and CR; lone surrogates;
line/paragraph separators and bidirectional controls."""
_ID_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""A character refused in an id: every C0/C1 control."""

FREE_TEXT_PATTERN = r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f" + LAYOUT_CONTROLS + "]*$"
"""JSON-schema ``pattern`` of free text (documentation and generated examples; the
validation itself is ``control_problem``, which also names the character)."""

INVISIBLE = (
    "\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5"
    "\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u2800\u3164\ufe00-\ufe0f\ufeff"
    "\uffa0\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e007f\U000e0100-\U000e01ef"
)
"""Regex class body of the characters ``visible_text`` removes. Written out rather than read from
``unicodedata`` at run time: a newer Python's Unicode tables must not change what a replayed
workflow stored (tests/core/test_hostile_input.py checks it covers the running Python's Cf)."""
_INVISIBLE = re.compile(f"[{INVISIBLE}]+")
_ODD_SPACE = re.compile("[\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]")
"""Spaces other than U+0020 (category Zs): shown as a space, stored as one."""

ID_TEXT_PATTERN = r"^[^\x00-\x1f\x7f-\x9f" + LAYOUT_CONTROLS + "]*$"
"""JSON-schema ``pattern`` of an id sent as text (``id_problem``: no control character at all)."""

_TEXT_CHAR = r"[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f" + LAYOUT_CONTROLS + "]"
MESSAGE_PATTERN = f"^{_TEXT_CHAR}*[^\\s\\x00-\\x1f\\x7f-\\x9f{LAYOUT_CONTROLS}{INVISIBLE}]{_TEXT_CHAR}*$"
"""JSON-schema ``pattern`` of a user message: free text with at least one visible character."""


def visible_text(text: str) -> str:
    """``text`` without its invisible characters (``INVISIBLE``) and with every unusual space
    made a plain one: what a reader of the text sees. Idempotent."""
    return _ODD_SPACE.sub(" ", _INVISIBLE.sub("", text))


def control_problem(text: str, what: str = "the message") -> Optional[str]:
    """Why ``text`` is refused for a control character, or None. The reason names the
    character's code point and position (``what`` names the field), never the text."""
    found = _CONTROL.search(text)
    if found is None:
        return None
    char = found.group(0)
    kind = ("an unpaired surrogate" if "\ud800" <= char <= "\udfff"
            else "a line separator" if char in "\u2028\u2029"
            else "a bidirectional text control" if "\u202a" <= char <= "\u2069" else "a control character")
    return (f"{what} contains {kind} (U+{ord(char):04X} at position {found.start()}); "
            "send plain text without control characters")


def id_problem(text: str, what: str) -> Optional[str]:
    """Why the id ``text`` is refused for a control character (tab, line feed and carriage
    return too: an id is one token), or None."""
    found = _ID_CONTROL.search(text)
    if found is None:
        return control_problem(text, what)  # surrogates
    return (f"{what} contains a control character (U+{ord(found.group(0)):04X} at position {found.start()}); "
            "ids are plain text without control characters")


def message_problem(text: str) -> Optional[str]:
    """Why the user message ``text`` is refused (empty, a control character, no visible
    character, over the byte limit), or None when it is acceptable. The same words at every edge."""
    if not text.strip():
        return "message text is empty"
    problem = control_problem(text)
    if problem is not None:
        return problem
    if not visible_text(text).strip():
        return "message text has no visible characters"
    size = len(text.encode("utf-8"))
    if size > MAX_USER_MESSAGE_BYTES:
        return f"message is {size} bytes; the limit is {MAX_USER_MESSAGE_BYTES} bytes"
    return None


def refuse_controls(what: str, is_id: bool = False) -> AfterValidator:
    """A pydantic validator (for ``Annotated[str, ...]``) refusing ``control_problem`` text
    (``id_problem`` with ``is_id``) with its reason as the error message (``what`` names
    the field in it)."""
    def check(value: str) -> str:
        problem = id_problem(value, what) if is_id else control_problem(value, what)
        if problem is not None:
            raise PydanticCustomError("control_character", problem)
        return value

    return AfterValidator(check)
