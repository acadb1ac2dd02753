"""Explicit confirmation: the workflow, not the model, shows the exact action detail
and reads the user's yes or no (policy clause explicit-confirmation).

The detail itself is each tool's ``detail`` (``workflows.domain.catalogue.details``): amounts
computed from the state's facts (decimal currency, 2 places), never from model text.
"""

from __future__ import annotations

import re
import unicodedata
from enum import Enum
from typing import Any

from workflows.domain.actions import call_arguments
from workflows.domain.catalogue import spec_of
from workflows.domain.state import ConversationState
from workflows.domain.user_text import visible_text

_AFFIRMATIVE = frozenset({
    "yes", "y", "yep", "yeah", "yes please", "yes proceed", "yes please proceed", "yes go ahead",
    "yes do it", "yes i confirm", "i confirm", "confirm", "confirmed", "proceed", "please proceed",
    "go ahead", "sure", "correct", "yes that's correct", "that's correct",
    "that's right", "yes that's right",
})
_NEGATIVE = frozenset({
    "no", "n", "nope", "nah", "no thanks", "no thank you", "don't", "do not", "stop", "cancel that",
    "never mind", "wait", "hold on", "not yet", "no don't", "no stop",
})
_AFFIRMATIVE_1_0 = _AFFIRMATIVE | {"ok", "okay"}
"""The affirmatives of release 1.0.0, which took "ok" for a yes (runs of 1.0.0 replay it)."""
_UNCLEAR = frozenset({
    "ok", "okay", "k", "kk", "ok then", "okay then", "alright", "all right", "fine", "maybe", "i guess",
    "i think so", "hmm", "hm", "probably", "perhaps", "whatever", "if you must", "yes and no",
})
"""Short answers that lean towards an answer without being one: "ok" acknowledges as often as it
agrees, so it is asked again rather than taken for a yes."""
_NEAR_WORDS = ("yes", "yeah", "yep", "nope", "sure", "confirm", "confirmed", "proceed")
"""Single-word answers a typo away from which a message is unclear ("yess", "yse", "nop")."""
_LOOK_ALIKES = str.maketrans({
    "а": "a", "с": "c", "е": "e", "һ": "h", "і": "i", "ј": "j", "о": "o", "р": "p", "ѕ": "s", "у": "y",
    "х": "x", "ԁ": "d", "ո": "n", "ν": "v", "ο": "o", "υ": "u", "ε": "e", "η": "n", "ρ": "p",
})
"""Cyrillic, Armenian and Greek letters drawn like Latin ones (Unicode's confusables, the lower-case
letters of the answers): "уеѕ" in Cyrillic reads "yes" and is not one."""


class Answer(str, Enum):
    """What a message says to the write shown before it."""

    YES = "yes"
    NO = "no"
    UNCLEAR = "unclear"
    """Looks like a yes or a no but is not exactly one: asked again."""
    OTHER = "other"
    """Anything else: a message about something else supersedes the shown write."""


_LONGEST = max(len(phrase) for phrase in _AFFIRMATIVE | _NEGATIVE)
MAX_CONFIRMATION_CHARS = 4 * _LONGEST + 16
"""A message longer than this is neither a yes nor a no, whatever it holds: an explicit
answer is short, and reading a long one costs nothing."""
# ASCII whitespace only: the set of answers is ASCII, and a yes needs no exotic spacing
_PUNCTUATION = re.compile(r"[,;:]", re.ASCII)
_TRAILING = re.compile(r"[.!\s]+$", re.ASCII)
_SPACES = re.compile(r"\s+", re.ASCII)
_MARKS = re.compile(r"[?!.,;:'\"()\-\s]+", re.ASCII)


def _normalise_1_0(text: str) -> str:
    if len(text) > MAX_CONFIRMATION_CHARS:
        return ""  # in neither set
    text = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    text = _PUNCTUATION.sub(" ", text)
    text = _TRAILING.sub("", text.strip())
    return _SPACES.sub(" ", text)


def _seen(text: str) -> str:
    """``text`` as a reader sees it (``visible_text``), in compatibility form (NFKC: full-width
    ``ｙｅｓ`` is ``yes``), without the spaces around it."""
    return unicodedata.normalize("NFKC", visible_text(text)).strip()


def _within_one_edit(word: str, target: str) -> bool:
    """True when ``word`` is ``target`` with one letter added, dropped, changed or two neighbours swapped."""
    if abs(len(word) - len(target)) > 1 or word == target:
        return False
    if len(word) == len(target):
        diff = [i for i, (a, b) in enumerate(zip(word, target)) if a != b]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and word[diff[0]] == target[diff[1]] and word[diff[1]] == target[diff[0]])
    short, long_ = sorted((word, target), key=len)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def _is_unclear(normal: str) -> bool:
    """``normal`` (``_normalise``d, in neither set) looks like an answer without being one: a
    hedge ("ok", "maybe"), an answer asked as a question ("yes?"), drawn with look-alike or
    accented letters ("уеѕ", "yés"), or a typo away from a one-word answer ("yess")."""
    if not normal or normal in _UNCLEAR:
        return True
    bare = _MARKS.sub(" ", normal).strip()
    plain = "".join(c for c in unicodedata.normalize("NFKD", bare.translate(_LOOK_ALIKES))
                    if not unicodedata.combining(c))
    if bare in _UNCLEAR or plain in _AFFIRMATIVE | _NEGATIVE | _UNCLEAR:
        return True
    return len(plain) >= 3 and " " not in plain and any(_within_one_edit(plain, w) for w in _NEAR_WORDS)


def answer_of(text: str) -> Answer:
    """What the message ``text`` says to the shown write. YES: the whole message is one of a fixed
    set of affirmatives ("yes", "Yes!!", "go ahead", "I confirm", with invisible characters
    removed and full-width letters read as ASCII); NO: one of the refusals ("no", "not yet");
    UNCLEAR: it looks like either without being one ("ok", "yes?", "уеѕ", "yess"); OTHER:
    anything else, a condition or a new request ("yes but only the first item")."""
    seen = _seen(text)
    if len(seen) > MAX_CONFIRMATION_CHARS:
        return Answer.OTHER
    normal = _normalise_1_0(seen)  # lower case, without trailing stops and commas
    if normal in _AFFIRMATIVE:
        return Answer.YES
    if normal in _NEGATIVE:
        return Answer.NO
    if _is_unclear(normal):
        return Answer.UNCLEAR
    return Answer.OTHER


def answer_of_1_0(text: str) -> Answer:
    """The rule of release 1.0.0 (runs of 1.0.0 replay it): "ok" is a yes, text is compared as
    sent, nothing is unclear."""
    normal = _normalise_1_0(text)
    return (Answer.YES if normal in _AFFIRMATIVE_1_0
            else Answer.NO if normal in _NEGATIVE else Answer.OTHER)


def is_yes(text: str) -> bool:
    """An explicit yes (``answer_of``). A question, a condition or a hedge ("yes?", "yes but
    only the first item", "ok, never mind") is not a yes."""
    return answer_of(text) is Answer.YES


def is_no(text: str) -> bool:
    """An explicit no to the pending action (the whole message is a refusal)."""
    return answer_of(text) is Answer.NO


def describe(state: ConversationState, call: Any) -> str:
    """The exact detail of a write, as shown to the user before they confirm (the tool
    spec's ``detail``; amounts from the state's facts)."""
    spec = spec_of(call.name)
    if spec.detail is None:
        raise ValueError(f"{call.name} is not a write")
    return spec.detail(state, call_arguments(call))
