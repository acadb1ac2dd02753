"""``--quick`` sizes a benchmark run only where no option asked for another size:
``bench/turns.py --quick --conversations 50`` ran 20 conversations and
``bench/turns/idle.py --quick --conversations 50`` ran 500, the option doing nothing."""

from __future__ import annotations

import sys

import pytest

from bench.turns import run as turns, idle as turns_idle


class Captured(Exception):
    pass


def _turns_args(monkeypatch, *argv: str):
    def main(args):
        raise Captured(args)
    monkeypatch.setattr(turns, "main", main)
    monkeypatch.setattr(sys, "argv", ["turns.py", *argv])
    with pytest.raises(Captured) as run:
        turns.cli()
    return run.value.args[0]


def _idle_args(monkeypatch, *argv: str):
    def idle_run(conversations, cache, samples, parallel):
        raise Captured((conversations, samples))
    monkeypatch.setattr(turns_idle, "idle_run", idle_run)
    monkeypatch.setattr(sys, "argv", ["turns_idle.py", *argv])
    with pytest.raises(Captured) as run:
        turns_idle.cli()
    return run.value.args[0]


def test_turns_quick_keeps_the_sizes_given(monkeypatch):
    quick = _turns_args(monkeypatch, "--quick")
    assert (quick.turns, quick.repeats, quick.conversations, quick.workers) == (8, 1, [20], [1, 2])
    given = _turns_args(monkeypatch, "--quick", "--conversations", "50", "--workers", "1", "--turns", "4")
    assert (given.turns, given.repeats, given.conversations, given.workers) == (4, 1, [50], [1])
    full = _turns_args(monkeypatch)
    assert (full.turns, full.repeats, full.conversations, full.workers) == (20, 10, [50, 200, 500], [1, 2, 4])


def test_turns_idle_quick_keeps_the_sizes_given(monkeypatch):
    assert _idle_args(monkeypatch, "--quick") == (500, 10)
    assert _idle_args(monkeypatch, "--quick", "--conversations", "50") == (50, 10)
    assert _idle_args(monkeypatch, "--samples", "5") == (10_000, 5)
    assert _idle_args(monkeypatch) == (10_000, 20)
