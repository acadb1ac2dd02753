"""Saved states the run could not use are refused when loaded: a negative turn (the
records built from the state bound it; it would otherwise fail every workflow task), and
money edited by hand into something other than exact cents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workflows.domain.migrations import StateIncompatible, load_state

FIXTURE = Path(__file__).resolve().parents[1] / "histories" / "v1.0.0" / "states" / "returns_and_cancels-two_writes_done.json"
GIFT = "gift_card_2259499"


def saved() -> dict:
    return json.loads(FIXTURE.read_text())


@pytest.mark.parametrize("turn", [-5, -1])
def test_a_negative_turn_is_refused_at_load(turn):
    # loads today; the next ModelRequest / TranscriptRecord (turn >= 0) raises inside the workflow
    state = saved()
    state["turn"] = turn
    with pytest.raises(StateIncompatible):
        load_state(state)


@pytest.mark.parametrize("text", ["12.345", "0.005", "1_000", "١٢٣"])
def test_hand_edited_money_is_not_silently_changed(text):
    # "nothing is silently dropped or guessed" (workflows.domain.migrations): sub-cent amounts are
    # rounded, digit separators and non-ASCII digits are read as numbers
    state = dict(saved(), schema_version=2)
    state["customer"]["payment_methods"][GIFT]["balance"] = text
    with pytest.raises(StateIncompatible):
        load_state(state)
