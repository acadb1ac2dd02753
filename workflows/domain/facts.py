"""Pin what the user states that the process depends on, verbatim, with its turn.

Extraction is deliberately literal (regular expressions over the user's text, no
model): ids, emails, payment methods, zip codes, names given as "my name is ..." or
"I'm ...", and cancellation reasons. Pinned facts are append-only and never
summarised, so an order id confirmed at turn 4 is still in the model's input at turn 30.
"""

from __future__ import annotations

import re

from workflows.domain.records import PinnedFact

# ASCII only (re.ASCII, and [0-9] rather than \d): an id is what the system of record can
# hold, so "#W４５６６８０９" (full-width digits) is not an order id and is never pinned; and
# the matching is linear in the text (no backtracking over nested structure, no recursion).
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("email", re.compile(r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,190}\.[A-Za-z]{2,24}", re.ASCII)),
    ("order_id", re.compile(r"#?W[0-9]{7}\b", re.ASCII)),
    ("payment_method_id", re.compile(r"\b(?:credit_card|gift_card|paypal)_[0-9]{1,20}\b", re.ASCII)),
    ("item_id", re.compile(r"(?<![0-9#W])[0-9]{10}(?![0-9])", re.ASCII)),
    ("user_id", re.compile(r"\b[a-z]{1,40}_[a-z]{1,40}_[0-9]{4}\b", re.ASCII)),
    ("zip", re.compile(r"(?<![0-9#W])[0-9]{5}(?![0-9])", re.ASCII)),
    ("cancel_reason", re.compile(r"no longer needed|ordered by mistake", re.IGNORECASE | re.ASCII)),
]
# Plain spaces only and bounded words: "\s" would also match control characters, letting a
# short message pin a fact of kilobytes.
_NAME = re.compile(
    r"\b(?:my name is|i am|i'm|this is) {1,3}([A-Z][a-z]{0,39}) {1,3}([A-Z][a-z]{0,39})\b",
    re.IGNORECASE | re.ASCII,
)

MAX_FACTS_PER_KIND_PER_MESSAGE = 10
MAX_PINNED_FACTS = 300
"""Bounds that keep the model input bounded whatever users type: a message full of
numbers pins only its first few of each kind, a conversation at most 300 facts, and
every fact is short (the patterns are bounded). Identity checks also read the recent
turns, so a full cap never locks a user out."""


def _normalise(kind: str, raw: str) -> str:
    if kind == "order_id":
        return raw if raw.startswith("#") else f"#{raw}"
    if kind in ("email", "cancel_reason"):
        return raw.lower()
    return raw


def _glued_to_digit(text: str, start: int, end: int) -> bool:
    """True when a digit of any script touches ``text[start:end]``: "paypal_4566８09" is
    not the id "paypal_4566" (re.ASCII sees the full-width 8 as a boundary)."""
    return (start > 0 and text[start - 1].isdecimal()) or (end < len(text) and text[end].isdecimal())


def _glued_to_address(text: str, start: int) -> bool:
    """True when the character before an email match could belong to the address (a letter of
    any script, or one of ``.%+-``): "аraj@x.com" with a Cyrillic а is not the address "raj@x.com",
    and "müller@x.com" is not "ller@x.com"."""
    return start > 0 and (text[start - 1].isalnum() or text[start - 1] in "._%+-")


def extract_facts(text: str, turn: int) -> list[PinnedFact]:
    """Facts in one user message, in order of kind then position.

    Returns ``PinnedFact(kind, value, verbatim, turn)`` items.
    """
    facts: list[PinnedFact] = []
    for kind, pattern in _PATTERNS:
        count = 0
        for match in pattern.finditer(text):
            if count >= MAX_FACTS_PER_KIND_PER_MESSAGE:
                break
            if _glued_to_digit(text, match.start(), match.end()):
                continue
            if kind == "email" and _glued_to_address(text, match.start()):
                continue
            count += 1
            raw = match.group(0)
            facts.append(PinnedFact(kind=kind, value=_normalise(kind, raw), verbatim=raw, turn=turn))
    for count, match in enumerate(_NAME.finditer(text)):
        if count >= MAX_FACTS_PER_KIND_PER_MESSAGE:
            break
        first, last = match.group(1).title(), match.group(2).title()
        facts.append(PinnedFact(kind="name", value=f"{first} {last}", verbatim=match.group(0), turn=turn))
    return facts


def stated_in(text: str, kind: str) -> list[str]:
    """The normalised values of ``kind`` that ``text`` states, in the order written, without
    repeats (at most ``MAX_FACTS_PER_KIND_PER_MESSAGE``)."""
    return list(dict.fromkeys(fact.value for fact in extract_facts(text, 0) if fact.kind == kind))


def merge_facts(existing: list[PinnedFact], new: list[PinnedFact]) -> list[PinnedFact]:
    """Append ``new`` facts whose (kind, value) is not pinned yet; never drops a pinned
    fact. Past the caps new facts are not pinned (they stay in the turn's text)."""
    seen = {(f.kind, f.value) for f in existing}
    merged = list(existing)
    for fact in new:
        if len(merged) >= MAX_PINNED_FACTS:
            break
        if (fact.kind, fact.value) not in seen:
            seen.add((fact.kind, fact.value))
            merged.append(fact)
    return merged
