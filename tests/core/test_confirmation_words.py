"""Confirmation words (``workflows.domain.policy.confirm``): ``is_yes`` accepts only an explicit yes to
the detail shown (an affirmative word first, no negation, no question, no condition),
``is_no`` a refusal, and no message is both.

docs/concepts.md: a write "runs only after the user's 'yes' to that detail". The refused messages
are near-misses a looser matcher takes as a yes.
"""

from __future__ import annotations

import pytest

from workflows.domain.policy.confirm import is_no, is_yes

# confirm.is_yes: "An explicit yes: the message starts with an affirmative word and has no
# negation." docs/concepts.md: a write "runs only after the user's 'yes' to that detail".
# Each message below is NOT an explicit yes to the shown detail, yet is_yes once accepted it.

NOT_A_YES = [
    "ok, never mind",                      # a withdrawal
    "okay cancel that",                    # is_no's own phrase, but is_yes wins in SupportWorkflow._turn
    "yes?",                                # a question
    "ok what would the refund be?",        # a question
    "confirm the amount first please",     # asks for information
    "yes but only the first item",         # a conditional yes to a different detail
    "sure, wait",                          # "wait" is in is_no, not checked by is_yes
    "yes, dont do it",                     # negation without an apostrophe
    "Yes, but don\u2019t cancel it",       # typographic apostrophe (phones, macOS)
    "ok hold on",
    "sure... nah",
]


@pytest.mark.parametrize("text", NOT_A_YES)
def test_non_explicit_yes_is_not_taken_as_confirmation(text):
    assert not is_yes(text), f"{text!r} is taken as the user's explicit yes"


@pytest.mark.parametrize("text", ["yes", "Yes!!", "yes.", "y", "Sure", "ok", "go ahead", "I confirm"])
def test_plain_yes_variants_are_a_yes(text):
    assert is_yes(text) and not is_no(text)


@pytest.mark.parametrize("text", ["sure not", "no... actually yes", "yes don't", "not yet", "nope"])
def test_negations_are_not_a_yes(text):
    assert not is_yes(text)


# lookalike letters and invisible characters


@pytest.mark.parametrize("text", [
    "yes\u200b", "\u200byes", "y\u0435s",  # zero-width space, Cyrillic 'е'
    "yes\u00a0but no", "ｙｅｓ but no", "yes\u2028no", "ok\u2026 no",
])
def test_lookalikes_and_zero_width_are_not_a_yes(text):
    assert not is_yes(text)


def test_yes_and_no_are_disjoint():
    from workflows.domain.policy.confirm import _AFFIRMATIVE, _NEGATIVE
    assert not (_AFFIRMATIVE & _NEGATIVE)
    assert not is_no("yes") and not is_yes("no")
