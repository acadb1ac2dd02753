"""Explicit confirmation: the workflow, not the model, shows the exact action detail
and reads the user's yes or no (policy clause explicit-confirmation).

The detail itself is each tool's ``detail`` (``workflows.domain.catalogue.details``): amounts
computed from the state's facts (decimal currency, 2 places), never from model text.
"""

from __future__ import annotations

import re
from typing import Any

from workflows.domain.actions import call_arguments
from workflows.domain.catalogue import spec_of
from workflows.domain.state import ConversationState

_AFFIRMATIVE = frozenset({
    "yes", "y", "yep", "yeah", "yes please", "yes proceed", "yes please proceed", "yes go ahead",
    "yes do it", "yes i confirm", "i confirm", "confirm", "confirmed", "proceed", "please proceed",
    "go ahead", "sure", "ok", "okay", "correct", "yes that's correct", "that's correct",
    "that's right", "yes that's right",
})
_NEGATIVE = frozenset({
    "no", "n", "nope", "nah", "no thanks", "no thank you", "don't", "do not", "stop", "cancel that",
    "never mind", "wait", "hold on", "not yet", "no don't", "no stop",
})


_LONGEST = max(len(phrase) for phrase in _AFFIRMATIVE | _NEGATIVE)
MAX_CONFIRMATION_CHARS = 4 * _LONGEST + 16
"""A message longer than this is neither a yes nor a no, whatever it holds: an explicit
answer is short, and reading a long one costs nothing."""
# ASCII whitespace only: the set of answers is ASCII, and a yes needs no exotic spacing
_PUNCTUATION = re.compile(r"[,;:]", re.ASCII)
_TRAILING = re.compile(r"[.!\s]+$", re.ASCII)
_SPACES = re.compile(r"\s+", re.ASCII)


def _normalise(text: str) -> str:
    if len(text) > MAX_CONFIRMATION_CHARS:
        return ""  # in neither set
    text = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    text = _PUNCTUATION.sub(" ", text)
    text = _TRAILING.sub("", text.strip())
    return _SPACES.sub(" ", text)


def is_yes(text: str) -> bool:
    """An explicit yes: the whole message is one of a fixed set of affirmatives ("yes",
    "Yes!!", "go ahead", "I confirm", ...). Anything else, a question, a condition or a
    hedge ("yes?", "yes but only the first item", "ok, never mind"), is not a yes."""
    return _normalise(text) in _AFFIRMATIVE


def is_no(text: str) -> bool:
    """An explicit no to the pending action (the whole message is a refusal)."""
    return _normalise(text) in _NEGATIVE


def describe(state: ConversationState, call: Any) -> str:
    """The exact detail of a write, as shown to the user before they confirm (the tool
    spec's ``detail``; amounts from the state's facts)."""
    spec = spec_of(call.name)
    if spec.detail is None:
        raise ValueError(f"{call.name} is not a write")
    return spec.detail(state, call_arguments(call))
