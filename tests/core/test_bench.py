"""The benchmarks' own parts, without a server:

- ``--quick`` sizes a run of ``bench/turns.py`` or ``bench/turns/idle.py`` only where no option
  asked for another size (``--quick --conversations 50`` runs 50);
- ``bench/tokens.py``: a quick 10-turn run writes its JSON report's shape, and its figures hold
  together (statekeeper's requests are the model activity's, with caching); the memory (one fact
  read, its tools offered) costs at most 3 % more than the same conversation without it, and the
  baselines offer the tools the prompt version offers;
- the chaos suite's pure parts (``bench/chaos/user.py``, ``bench/chaos/faults.py``). Its front end
  resends a message with the same id for as long as the message's task may run: on an
  overloaded machine a conversation whose workflow task keeps timing out can answer after 22
  minutes (seen in a 200-task run), and a front end that gave up after 900 s would count the
  task lost although nothing was.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from bench.chaos.faults import ChaosBoard, _conversation
from bench.chaos.run import parser
from bench.chaos.user import FrontEnd, p95, reason_group
from bench.tokens import run as tokens_run, strategies as token_strategies
from bench.turns import run as turns, idle as turns_idle
from starter.client.conversations import ConversationError
from systems.retail import load_data
from systems.service_kit.faults import Fault
from workflows.domain.prompt import PROMPT_VERSION


# --- --quick keeps the sizes given ---

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


# --- bench/tokens.py ---

ROOT = Path(__file__).resolve().parents[2]
STRATEGIES = {"statekeeper", "naive", "naive_cached", "window"}
FIELDS = {"input_tokens", "cost_weighted_tokens", "max_context_tokens", "per_call_max_over_min_after_10",
          "fact_retained"}


def test_quick_run_writes_the_json_shape(tmp_path):
    out = tmp_path / "tokens.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "tokens.py"), "--quick", "--turns", "10", "--json",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "statekeeper" in done.stdout and "modelled" in done.stdout
    figures = json.loads(out.read_text())
    assert list(figures) == ["runs"]
    (run,) = figures["runs"]
    assert set(run) == {"turns", "strategies", "scenario"} and run["turns"] == 10
    assert run["scenario"] == {"gaps": "none", "cache_ttl_seconds": 300.0, "conversations_per_minute": 10.0,
                               "seed": 7, "memory": True, "prompt_version": PROMPT_VERSION,
                               "simulated_seconds": 0.0, "cache_write_price": 1.25}
    assert set(run["strategies"]) == STRATEGIES
    for strategy in run["strategies"].values():
        assert set(strategy) == FIELDS
        assert strategy["input_tokens"] > 0 and strategy["cost_weighted_tokens"] > 0
        assert strategy["per_call_max_over_min_after_10"] is None  # no turn after the 10th
    naive, cached = run["strategies"]["naive"], run["strategies"]["naive_cached"]
    assert naive["input_tokens"] == cached["input_tokens"]  # the same prompts, priced differently
    assert cached["cost_weighted_tokens"] < naive["cost_weighted_tokens"]
    assert run["strategies"]["statekeeper"]["fact_retained"] is True


def test_typical_gaps_let_time_pass_and_caches_expire_alike_for_every_strategy(tmp_path):
    """``--gaps typical`` is seeded (two runs agree), lets think time pass between turns, and with no
    other traffic a cold shared prefix costs every strategy more than with warm caches."""
    def run(*extra: str) -> dict:
        out = tmp_path / f"tokens{len(list(tmp_path.iterdir()))}.json"
        done = subprocess.run([sys.executable, str(ROOT / "bench" / "tokens.py"), "--turns", "30", "--json", str(out),
                               *extra], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(out.read_text())["runs"][0]

    warm, gaps, again = run(), run("--gaps", "typical", "--conversations-per-minute", "0"), run(
        "--gaps", "typical", "--conversations-per-minute", "0")
    assert gaps == again and gaps["scenario"]["simulated_seconds"] > 60
    for strategy in ("statekeeper", "naive_cached"):
        assert gaps["strategies"][strategy]["cost_weighted_tokens"] > warm["strategies"][strategy]["cost_weighted_tokens"]
    hour = run("--gaps", "typical", "--cache-ttl", "3600")
    assert hour["scenario"]["cache_write_price"] == 2.0
    bad = subprocess.run([sys.executable, str(ROOT / "bench" / "tokens.py"), "--cache-ttl", "0"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--cache-ttl must be positive" in bad.stderr


@pytest.mark.parametrize("turns", [6, 10])
def test_the_memory_costs_at_most_three_percent_of_the_same_conversation_without_it(turns):
    tasks = token_strategies.cancel_tasks(load_data())

    def run(memory: bool) -> tokens_run.Run:
        played = tokens_run.Run(tasks[turns % len(tasks)], turns, 6, tokens_run.Scenario(memory=memory))
        asyncio.run(played.play())
        return played

    on, off = run(True), run(False)
    on_cost, off_cost = (r.figures()["statekeeper"]["cost_weighted_tokens"] for r in (on, off))
    assert off_cost < on_cost <= off_cost * 1.03, (on_cost, off_cost)
    assert on.state.customer.memory and off.state.customer.memory is None  # the fact was read only with memory
    assert {t["name"] for t in on.transcript.tools} - {t["name"] for t in off.transcript.tools} == {
        "remember_fact", "forget_fact"}


# --- The chaos suite's pure parts ---

class _Flaky:
    """A client whose ``send_message`` says ``outcome_unknown`` ``failures`` times, then answers."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.ids: list[str] = []

    async def send_message(self, conversation_id: str, text: str, message_id: str) -> str:
        self.ids.append(message_id)
        if len(self.ids) <= self.failures:
            raise ConversationError("unknown", "outcome_unknown", message_id=message_id)
        return f"reply to {text}"


async def test_front_end_resends_with_the_same_message_id_until_answered(monkeypatch):
    async def instant(_seconds: float) -> None:
        return None

    monkeypatch.setattr("bench.chaos.user.asyncio.sleep", instant)
    client = _Flaky(failures=4)
    front = FrontEnd(client, patience_seconds=60)  # type: ignore[arg-type]
    assert await front.send_message("c1", "yes") == "reply to yes"
    assert len(client.ids) == 5 and len(set(client.ids)) == 1
    assert front.retries == 4 and len(front.message_seconds) == 1


async def test_front_end_does_not_resend_a_refusal():
    class Refusing:
        async def send_message(self, *args):
            raise ConversationError("finished", "finished")

    front = FrontEnd(Refusing())  # type: ignore[arg-type]
    try:
        await front.send_message("c1", "yes")
    except ConversationError as err:
        assert err.kind == "finished"
    else:
        raise AssertionError("a refusal must reach the runner")
    assert front.retries == 0


def test_messages_are_resent_as_long_as_the_task_may_run_by_default():
    args = parser().parse_args(["--tasks", "t.json", "--n", "1", "--task-timeout", "1234"])
    assert args.patience is None and args.task_timeout == 1234  # run() uses the task timeout


def test_any_five_faults_cover_every_kind():
    counts: Counter = Counter()
    board = ChaosBoard(1.0, seed=3, counts=counts, lock=threading.Lock())
    kinds = [board.take("/operations", None, None)[0] for _ in range(10)]
    assert set(kinds[:5]) == set(Fault) == set(kinds[5:])
    assert counts == Counter({f.value: 2 for f in Fault})
    assert ChaosBoard(0.0, 1, Counter(), threading.Lock()).take("/x", None, None) == (None, None)


def test_header_fault_still_wins_and_is_counted():
    counts: Counter = Counter()
    board = ChaosBoard(0.0, seed=1, counts=counts, lock=threading.Lock())
    assert board.take("/tickets", "slow_lock", "2") == (Fault.SLOW_LOCK, 2.0)
    assert counts == Counter({"slow_lock": 1})


def test_effect_keys_name_their_conversation():
    assert _conversation("pay:cancel_pending_order:#W1:tb-x-3.t4") == "tb-x-3"
    assert _conversation("pay:modify_pending_order_payment:#W1:tb-x-12.t10") == "tb-x-12"


def test_reasons_group_without_ids_and_p95_is_nearest_rank():
    assert reason_group("cancel of #W123 for sara_doe_4321 failed") == reason_group("cancel of #W9 for li_wu_1234 failed")
    assert p95([]) == 0.0
    assert p95([float(i) for i in range(1, 101)]) == 95.0
    assert p95([3.0]) == 3.0
