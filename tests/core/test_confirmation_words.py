"""Reading the answer to a shown write (``workflows.domain.policy.confirm.answer_of``): an
explicit yes, an explicit no, an unclear answer that is asked again, or another subject.

docs/concepts.md: a write "runs only after the user's 'yes' to that detail". A yes is read on
the text a person sees: invisible characters removed and compatibility letters folded (NFKC),
so every invisible-character "yes" is a yes; look-alike letters, hedges and questions are
asked again; a condition or a new request is another subject.
"""

from __future__ import annotations

import pytest

from workflows.domain.policy.confirm import _AFFIRMATIVE, _NEGATIVE, Answer, answer_of, answer_of_1_0, is_no, is_yes

NOT_A_YES = [
    "ok, never mind",                      # a withdrawal
    "okay cancel that",                    # is_no's own phrase after a hedge
    "yes?",                                # a question
    "ok what would the refund be?",        # a question
    "confirm the amount first please",     # asks for information
    "yes but only the first item",         # a conditional yes to a different detail
    "sure, wait",                          # "wait" is a no
    "yes, dont do it",                     # negation without an apostrophe
    "Yes, but don\u2019t cancel it",       # typographic apostrophe (phones, macOS)
    "ok hold on",
    "sure... nah",
    "ok", "okay",                          # an acknowledgement as often as an agreement
]


@pytest.mark.parametrize("text", NOT_A_YES)
def test_non_explicit_yes_is_not_taken_as_confirmation(text):
    assert not is_yes(text), f"{text!r} is taken as the user's explicit yes"


@pytest.mark.parametrize("text", ["yes", "Yes!!", "yes.", "y", "Sure", "go ahead", "I confirm"])
def test_plain_yes_variants_are_a_yes(text):
    assert is_yes(text) and not is_no(text)


@pytest.mark.parametrize("text", ["sure not", "no... actually yes", "yes don't", "not yet", "nope"])
def test_negations_are_not_a_yes(text):
    assert not is_yes(text)


INVISIBLE_YES = [
    "yes\u200b",            # zero-width space after
    "\ufeffyes",            # byte order mark before
    "yes\u2060",            # word joiner
    "ye\u200bs",            # zero-width space inside
    "y\u200des",            # zero-width joiner inside
    "ye\u00ads",            # soft hyphen inside
    "\u00a0yes\u00a0",      # non-breaking spaces around
    "yes\U000e0020\U000e0041",  # Unicode tag characters
    "y\ufe0fes",            # a variation selector
    "ｙｅｓ",                # full-width letters (NFKC: yes)
    "yes" + " " * 86,       # spaces past the length of any answer, around it
    "yes" + "\u00a0" * 100,  # no-break spaces past it
]


@pytest.mark.parametrize("text", INVISIBLE_YES)
def test_a_yes_with_invisible_characters_is_the_yes_a_person_reads(text):
    assert answer_of(text) is Answer.YES


@pytest.mark.parametrize("text", ["no\u200b", "\ufeffNo.", "n\u00ado", "ｎｏ"])
def test_a_no_with_invisible_characters_is_a_no(text):
    assert answer_of(text) is Answer.NO


UNCLEAR = [
    "y\u0435s",        # Cyrillic е
    "\u0443\u0435\u0455",  # all Cyrillic: уеѕ
    "yés",             # an accent
    "yes?", "no?", "yes!?",
    "ok", "okay", "Okay.", "maybe", "i guess",
    "yess", "yse", "nop",
]


@pytest.mark.parametrize("text", UNCLEAR)
def test_an_answer_that_looks_like_a_yes_or_no_without_being_one_is_unclear(text):
    assert answer_of(text) is Answer.UNCLEAR


@pytest.mark.parametrize("text", [
    "yes\u00a0but no", "ｙｅｓ but no", "what is the status of #W2378156?", "hi", "so",
    "also cancel order #W5183325", "yes but only the first item", "x" * 500,
])
def test_a_message_about_something_else_is_another_subject(text):
    assert answer_of(text) is Answer.OTHER


@pytest.mark.parametrize("text,answer", [
    ("ok", Answer.YES), ("okay", Answer.YES), ("yes", Answer.YES), ("yes\u200b", Answer.OTHER),
    ("yes?", Answer.OTHER), ("no", Answer.NO), ("y\u0435s", Answer.OTHER),
])
def test_the_1_0_0_rule_is_kept_for_its_runs(text, answer):
    assert answer_of_1_0(text) is answer


def test_yes_and_no_are_disjoint():
    assert not (_AFFIRMATIVE & _NEGATIVE)
    assert not is_no("yes") and not is_yes("no")
