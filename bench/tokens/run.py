"""Input tokens per model call: statekeeper (its state, cache-friendly layout and prompt
caching) vs resending the transcript (without caching, with incremental prefix caching) vs a
sliding window of the last k turns, over conversations of 6 to 500 user turns.

How it runs: the **pure core**, not a Temporal server. Each conversation applies its turns
with the workflow's own pure parts (``workflows.domain.transitions``, ``workflows.domain.policy.validator``,
``workflows.domain.policy.confirm``, ``workflows.domain.keys``) in the order ``workflows.conversation.turn`` applies them; reads
and the confirmed write run against an in-memory copy of the τ-bench data
(``systems.retail.tools.run_tool``). Every statekeeper model call is the request the model
activity sends: ``render_request(state_view(state), PROMPT_VERSION)`` →
``build_create_kwargs`` → the anthropic SDK → the offline stand-in (``offline_client``), whose
rules brain answers and whose ``PromptCache`` reports the usage. The baselines' requests are
built from the same conversation (``bench/tokens/strategies.py``), offer the tools the prompt
version offers statekeeper's model, and are accounted by the same cache model, each with its own cache. **All figures are modelled**: tokens ≈ characters / 4,
the provider's caching rules as ``systems/model/cache.py`` models them; cost-weighted tokens
price cache reads 0.1×, cache writes 1.25×, fresh input 1×.

The conversations come from τ-bench cancel tasks (``../shared/taubench-retail``), padded with
off-topic turns and corrections; the order id stated at turn 4 is what the final cancellation
acts on, and ``fact_retained`` says whether it is in each strategy's request of that decision.
statekeeper makes the calls its workflow makes (reads the state calls for run without one, a
write's outcome is worded without one); the baselines make the calls a tool-use loop makes: one
per tool call, and one for the reply.

It replaces ``bench/prompt_size.py`` (characters of one snapshot vs the transcript), which
measured neither caching nor the whole request.

Run: ``.venv/bin/python bench/tokens.py [--turns 6,10,20,30,100,500] [--window 6] [--json OUT] [--quick]
[--gaps none|typical] [--cache-ttl 300] [--conversations-per-minute 10] [--memory on|off]`` (``--quick``: 10 and 100
turns unless ``--turns`` says otherwise). ``--gaps typical`` lets seeded think time pass between
turns, so caches can expire (``Scenario``); other conversations keep the shared prefix warm.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from activities.llm.model_activity import offline_client  # noqa: E402
from activities.llm.wire import build_create_kwargs, read_proposal  # noqa: E402
from bench.tokens import strategies as ts  # noqa: E402
from systems.model.cache import PromptCache  # noqa: E402
from systems.retail import load_data  # noqa: E402
from systems.retail.tools import run_tool  # noqa: E402
from workflows.domain import keys, replies  # noqa: E402
from workflows.domain import transitions as tr  # noqa: E402
from workflows.conversation.state_reads import next_due_read  # noqa: E402
from workflows.domain.actions import ToolCallAction, call_arguments  # noqa: E402
from workflows.domain.catalogue import System, spec_of  # noqa: E402
from workflows.domain.policy.clauses import Rule  # noqa: E402
from workflows.domain.policy.confirm import describe, is_yes  # noqa: E402
from workflows.options import MAX_CONSECUTIVE_REJECTIONS, MAX_MODEL_STEPS_PER_TURN  # noqa: E402
from workflows.domain.policy.validator import validate_execution, validate_proposal  # noqa: E402
from workflows.domain.prompt import PROMPT_VERSION, prompt_version, render_request, state_view  # noqa: E402
from workflows.domain.state import Confirmation, ConversationState, Role  # noqa: E402

MODEL = "statekeeper-offline-stand-in"
STRATEGIES = ("statekeeper", "naive", "naive_cached", "window")
CONTEXT_LIMIT = 200_000


THINK_MEDIAN_SECONDS = 60.0
THINK_SIGMA = math.log(5) / 0.8416
"""Think time between turns under ``--gaps typical``: lognormal with a median of 60 s and 20 % of
gaps over 5 minutes (P(X > 300 s) = 0.2 gives sigma = ln 5 / z(0.8)). Fixed, so no one tunes it."""
SUPERVISOR_WAIT_SECONDS = (120.0, 1800.0)
"""A supervisor's wait for a write above the approval threshold, uniform in this range (seconds)."""
DEFAULT_CONVERSATIONS_PER_MINUTE = 10.0
"""Other conversations a minute on the deployment, each touching the shared system-and-tools
prefix of every strategy (a deployment with traffic; 0: this conversation alone)."""
SEED = 7


@dataclass(frozen=True)
class Scenario:
    """How time passes and caches expire (``--gaps``, ``--cache-ttl``, ``--conversations-per-minute``),
    and whether the customer's memory is read and its tools offered (``--memory``)."""

    gaps: str = "none"
    cache_ttl_seconds: float = 300.0
    conversations_per_minute: float = DEFAULT_CONVERSATIONS_PER_MINUTE
    seed: int = SEED
    memory: bool = True

    @property
    def prompt_version(self) -> str:
        """The prompt the calls use: the current one, or it without the memory tools."""
        return PROMPT_VERSION if self.memory else f"{PROMPT_VERSION}-no-memory"

    @property
    def write_price(self) -> float:
        """A cache write's price relative to fresh input: 2× for the 1-hour cache, else 1.25×."""
        return 2.0 if self.cache_ttl_seconds >= 3600 else 1.25


class Run:
    """One conversation of ``turns`` user turns and the usage of every strategy's calls."""

    def __init__(self, task: dict[str, Any], turns: int, window: int, scenario: Scenario = Scenario()) -> None:
        self.task, self.turns, self.window, self.scenario = task, turns, window, scenario
        self.data = load_data()
        self.state = ConversationState(conversation_id=f"bench-tokens-{turns}")
        self.transcript = ts.Transcript(prompt_version(scenario.prompt_version).withheld_tools)
        self.now = 0.0
        self.random = random.Random(scenario.seed)
        caches = {s: PromptCache(ttl_seconds=scenario.cache_ttl_seconds, clock=lambda: self.now) for s in STRATEGIES}
        self.caches = caches
        self.client = offline_client(30.0, brain=ts.status_brain, cache=caches["statekeeper"])
        self.calls: dict[str, list[tuple[int, dict[str, int]]]] = {s: [] for s in STRATEGIES}
        self.final_prompts: dict[str, bool] = {}

    def wait(self, seconds: float) -> None:
        """Let ``seconds`` pass (think time): caches may expire meanwhile."""
        self.now += seconds

    def warm(self, strategy: str, body: dict[str, Any]) -> None:
        """With traffic (``conversations_per_minute``), another conversation touched this strategy's
        shared system-and-tools prefix less than ``60 / rate`` seconds ago: where that is within the
        cache's lifetime, the prefix is warm when this call comes, for every strategy alike."""
        rate = self.scenario.conversations_per_minute
        if rate > 0 and 60.0 / rate < self.scenario.cache_ttl_seconds:
            self.caches[strategy].account(ts.shared_prefix(body))

    def think_time(self) -> float:
        """Seconds the user takes before the next message (0 with ``--gaps none``)."""
        if self.scenario.gaps == "none":
            return 0.0
        return self.random.lognormvariate(math.log(THINK_MEDIAN_SECONDS), THINK_SIGMA)

    async def model_call(self) -> Any:
        """One statekeeper call: the request the model activity sends."""
        state = self.state
        version = self.scenario.prompt_version
        kwargs = build_create_kwargs(render_request(state_view(state), version), model=MODEL,
                                     max_tokens=1024, conversation_id=state.conversation_id,
                                     prompt_version=version)
        self.warm("statekeeper", kwargs)
        response = await self.client.messages.create(**kwargs)
        usage = response.usage
        self.calls["statekeeper"].append((state.turn, {
            "input_tokens": usage.input_tokens, "cache_read_input_tokens": usage.cache_read_input_tokens or 0,
            "cache_creation_input_tokens": usage.cache_creation_input_tokens or 0}))
        action = read_proposal(response)
        if action.kind == "tool_call" and spec_of(action.tool.name).is_write:
            self.final_prompts["statekeeper"] = ts.contains(kwargs, self.task["order_id"])
        return action

    def naive_call(self, deciding_write: bool = False) -> None:
        """One call of a tool-use loop that resends the transcript (each baseline strategy): a
        loop makes one per tool call and one for the reply, whatever statekeeper makes."""
        bodies = {s: self.transcript.request(s, MODEL, self.window) for s in STRATEGIES[1:]}
        for strategy, body in bodies.items():
            self.warm(strategy, body)
            self.calls[strategy].append((self.state.turn, self.caches[strategy].account(body)))
            if deciding_write:  # the decision the turn-4 fact matters to
                self.final_prompts[strategy] = ts.contains(body, self.task["order_id"])

    def read(self, call: Any) -> None:
        """A read statekeeper runs; a tool-use loop asks its model for it first. The memory's read
        (``--memory on``) finds one fact remembered in an earlier conversation: refunds go to the
        customer's first payment method (the baselines keep no memory)."""
        if spec_of(call.name).system is System.MEMORY:
            customer = self.state.customer
            method = next(iter(customer.payment_methods), "") if customer is not None else ""
            tr.apply_read_result(self.state, call, json.dumps({"facts": [
                {"kind": "refund_method", "value": method, "order_id": None, "age_days": 12,
                 "source": {"conversation_id": "bench-tokens-earlier", "turn": 3,
                            "words": "please remember that refunds go to my gift card"}}]}))
            return
        self.naive_call()
        result = run_tool(self.data, call.name, call_arguments(call))
        self.transcript.tool(call.name, call_arguments(call), result)
        tr.apply_read_result(self.state, call, result)

    async def turn(self, text: str) -> str:
        """One user turn, in the order ``workflows.conversation.turn`` applies it (no approvals: none
        of these writes passes the approval threshold's amount in this bench's tasks): the answer
        to a write shown last turn (its outcome worded from the state), then the state-driven reads
        and the model's proposals."""
        state = self.state
        tr.receive_user_message(state, text)
        self.transcript.user(text)
        pending = tr.take_pending(state)
        if pending is not None:
            if is_yes(text):
                confirmation = Confirmation(operation_id=pending.operation_id, digest=pending.digest,
                                            turn=state.turn, verbatim=text)
                verdict = validate_execution(state, pending, confirmation)
                if verdict.accepted:
                    args = call_arguments(pending.call)
                    self.naive_call()  # the loop's model calls the write after the yes
                    result = run_tool(self.data, pending.call.name, args)
                    self.transcript.tool(pending.call.name, args, result)
                    ok = not tr.is_error(result)
                    tr.apply_write_result(state, pending.call, pending.operation_id,
                                          keys.idempotency_key(pending.call, pending.operation_id), result, ok)
                    self.naive_call()  # and words its outcome; statekeeper's workflow does that itself
                    order = state.orders.get(args.get("order_id", ""))
                    return replies.write_outcome(pending.detail, None if ok else result, args.get("order_id"),
                                                 order.status if order is not None else None)
                tr.decline(state, pending, verdict.rule.value, verdict.reason)
            else:
                tr.decline(state, pending, Rule.USER_DECLINED.value, f"the user declined: {pending.detail}")
        rejections = 0
        for _ in range(MAX_MODEL_STEPS_PER_TURN):
            while (due := next_due_read(state, self.scenario.memory)) is not None:
                self.read(due)
            action = await self.model_call()
            if action.kind == "tool_calls":
                for call in action.tools:
                    if validate_proposal(state, ToolCallAction(tool=call)).accepted and not spec_of(call.name).is_write:
                        self.read(call)
                continue
            verdict = validate_proposal(state, action)
            if not verdict.accepted:
                tr.reject(state, verdict.rule.value, verdict.reason, action.model_dump(mode="json"))
                rejections += 1
                if rejections >= MAX_CONSECUTIVE_REJECTIONS:
                    self.naive_call()
                    return replies.refused(verdict.rule.value)
                continue
            rejections = 0
            if action.kind in ("reply", "end", "transfer_to_human"):
                self.naive_call()
                return (action.text or replies.ENDED) if action.kind != "transfer_to_human" else replies.TRANSFERRED
            call = action.tool
            if verdict.needs_confirmation:
                self.naive_call(deciding_write=True)  # the loop's model decides the write and asks to confirm
                tr.await_confirmation(state, keys.operation_id(state.conversation_id, state.turn), call,
                                      describe(state, call))
                return replies.confirmation_prompt(state.pending_confirmation.detail)
            self.read(call)
        self.naive_call()
        return replies.COULD_NOT_FINISH

    async def play(self) -> None:
        """Every turn of the script; each reply joins the state and the transcript."""
        for n, text in enumerate(ts.script(self.task, self.turns)):
            if n:
                self.wait(self.think_time())
            reply = await self.turn(text)
            tr.add_turn(self.state, Role.ASSISTANT, reply)
            self.transcript.assistant(reply)
        await self.client.close()

    def figures(self) -> dict[str, Any]:
        """The issue's per-strategy figures of this run."""
        out = {}
        for strategy in STRATEGIES:
            calls = self.calls[strategy]
            contexts = [ts.context(u) for _, u in calls]
            late = [ts.context(u) for turn, u in calls if turn > 10]
            out[strategy] = {
                "input_tokens": sum(contexts),
                "cost_weighted_tokens": round(sum(ts.weighted(u, self.scenario.write_price) for _, u in calls), 1),
                "max_context_tokens": max(contexts),
                "per_call_max_over_min_after_10": ts.max_over_min(late),
                "fact_retained": self.final_prompts.get(strategy, False),
            }
        return out

    def per_turn(self, strategy: str) -> dict[int, tuple[int, float, int]]:
        """turn -> (input tokens, cost-weighted tokens, largest context) of ``strategy``."""
        rows: dict[int, list[float]] = {}
        for turn, usage in self.calls[strategy]:
            row = rows.setdefault(turn, [0, 0.0, 0])
            row[0] += ts.context(usage)
            row[1] += ts.weighted(usage, self.scenario.write_price)
            row[2] = max(row[2], ts.context(usage))
        return {t: (int(r[0]), r[1], int(r[2])) for t, r in rows.items()}

    def first_turn_past(self, strategy: str, limit: int = CONTEXT_LIMIT) -> Optional[int]:
        """The first turn whose context passes ``limit`` tokens (None: never)."""
        return next((t for t, u in self.calls[strategy] if ts.context(u) > limit), None)


def print_run(console: Console, run: Run, figures: dict[str, Any]) -> None:
    """The run's totals and a per-turn sample."""
    naive, cached = figures["naive"]["cost_weighted_tokens"], figures["naive_cached"]["cost_weighted_tokens"]
    table = Table(title=f"{run.turns} turns (τ-bench task {run.task['task_index']}; modelled: tokens ≈ chars/4)")
    for col in ("strategy", "input tokens", "cost-weighted", "÷ naive", "÷ naive cached", "max context",
                "max/min after t10", "turn-4 fact kept"):
        table.add_column(col, justify="right")
    for strategy, f in figures.items():
        ratio = f["per_call_max_over_min_after_10"]
        table.add_row(strategy, f"{f['input_tokens']:,}", f"{f['cost_weighted_tokens']:,.0f}",
                      f"{f['cost_weighted_tokens'] / naive:.3f}", f"{f['cost_weighted_tokens'] / cached:.3f}",
                      f"{f['max_context_tokens']:,}", "-" if ratio is None else f"{ratio:.2f}",
                      "yes" if f["fact_retained"] else "no")
    console.print(table)
    past = run.first_turn_past("naive")
    console.print(f"naive context passes {CONTEXT_LIMIT:,} tokens at turn: {past or 'never'}")
    turns = sorted({1, 2, 4, 5, 10, 20, 50, 100, 200, 300, 400, 499, 500} & set(range(1, run.turns + 1)))
    sample = Table(title=f"per turn, {run.turns} turns: input tokens / cost-weighted (largest context)")
    sample.add_column("turn", justify="right")
    for strategy in STRATEGIES:
        sample.add_column(strategy, justify="right")
    rows = {s: run.per_turn(s) for s in STRATEGIES}
    for turn in turns:
        sample.add_row(str(turn), *(f"{rows[s][turn][0]:,} / {rows[s][turn][1]:,.0f} ({rows[s][turn][2]:,})"
                                    if turn in rows[s] else "no call" for s in STRATEGIES))
    console.print(sample)


async def main_async(turn_counts: list[int], window: int, json_out: Optional[str],
                     scenario: Scenario = Scenario()) -> dict[str, Any]:
    console = Console(width=170)
    tasks = ts.cancel_tasks(load_data())
    runs = []
    for turns in turn_counts:
        run = Run(tasks[turns % len(tasks)], turns, window, scenario)  # the same task for a length in every release
        await run.play()
        figures = run.figures()
        print_run(console, run, figures)
        runs.append({"turns": turns, "strategies": figures, "scenario": {
            **asdict(scenario), "prompt_version": scenario.prompt_version,
            "simulated_seconds": round(run.now, 1), "cache_write_price": scenario.write_price}})
    summary = Table(title=f"cost-weighted input ÷ naive with prefix caching (gaps {scenario.gaps}, cache "
                          f"{scenario.cache_ttl_seconds:.0f} s, {scenario.conversations_per_minute:g} other "
                          "conversations a minute)")
    for col in ("turns", "statekeeper", "window"):
        summary.add_column(col, justify="right")
    for r in runs:
        cached = r["strategies"]["naive_cached"]["cost_weighted_tokens"]
        summary.add_row(str(r["turns"]), *(f"{r['strategies'][s]['cost_weighted_tokens'] / cached:.3f}"
                                           for s in ("statekeeper", "window")))
    console.print(summary)
    result = {"runs": runs}
    if json_out:
        Path(json_out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def main(argv: Optional[list[str]] = None) -> None:
    """Parse the arguments and run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", default=None, help="comma-separated conversation lengths (default 6,10,20,30,100,500)")
    parser.add_argument("--window", type=int, default=6, help="turns the sliding window keeps (default 6)")
    parser.add_argument("--json", dest="json_out", default=None, help="write the figures as JSON to this file")
    parser.add_argument("--quick", action="store_true", help="10 and 100 turns (unless --turns is given)")
    parser.add_argument("--gaps", choices=("none", "typical"), default="none",
                        help="none: every cache stays warm; typical: seeded think time between turns (lognormal, "
                             "median 60 s, 20%% over 5 minutes)")
    parser.add_argument("--cache-ttl", type=float, default=300.0,
                        help="prompt cache lifetime in seconds (300; 3600 prices a cache write at 2x)")
    parser.add_argument("--conversations-per-minute", type=float, default=DEFAULT_CONVERSATIONS_PER_MINUTE,
                        help="other conversations a minute, keeping the shared system-and-tools prefix warm "
                             f"(default {DEFAULT_CONVERSATIONS_PER_MINUTE:g}; 0: none)")
    parser.add_argument("--memory", choices=("on", "off"), default="on",
                        help="on: the customer's remembered facts are read after authentication (one fact) and "
                             "the memory tools offered; off: neither (the prompt without the memory tools)")
    args = parser.parse_args(argv)
    if args.cache_ttl <= 0 or args.conversations_per_minute < 0:
        parser.error("--cache-ttl must be positive and --conversations-per-minute at least 0")
    counts = args.turns or ("10,100" if args.quick else "6,10,20,30,100,500")
    scenario = Scenario(gaps=args.gaps, cache_ttl_seconds=args.cache_ttl,
                        conversations_per_minute=args.conversations_per_minute, memory=args.memory == "on")
    asyncio.run(main_async([int(n) for n in counts.split(",")], args.window, args.json_out, scenario))


if __name__ == "__main__":
    main()
