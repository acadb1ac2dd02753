"""``statekeeper backtest``: would another prompt version or model have decided differently?

For each recorded model call of the decision log (``activities.journal``) the backtest
renders the recorded state view with prompt version ``V`` (``workflows.domain.prompt.render_request``),
asks model ``M`` through the very SDK path of the model activity (``build_create_kwargs``,
``read_proposal``; offline the stand-in behind ``offline_client``), validates the answer with
the current policy on the state the view stands for (``starter.ops.backtest_diff``) and compares
it with the recorded proposal and verdict.

It executes nothing: no tool, no activity, no Temporal, no write to the journal, the system
of record or the offline model's plan book (the stand-in only reads a benchmark
conversation's plan, which exists while the run kept it: ``taubench --keep-stores``).
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

import sqlalchemy as sa
from pydantic import BaseModel

from activities.store.journal import DecisionRow, JournalStore
from activities.llm.model_activity import build_client, map_api_error, offline_client, sdk
from activities.llm.wire import MalformedOutput, build_create_kwargs, read_proposal
from settings import Settings
from starter.ops.backtest_diff import (
    Difference,
    UnreadableView,
    classify,
    policy_class,
    recorded_class,
    state_from_view,
)
from workflows.domain.prompt import PROMPT_VERSIONS, UnknownPromptVersion, prompt_version, render_request

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic  # the SDK loads on first use (``sdk``): the CLI starts faster

MODEL_ATTEMPTS = 3
"""Attempts per call on a transient model error (429, 5xx, connection), then the run stops."""
RETRY_DELAY_SECONDS = 1.0


class BacktestError(Exception):
    """The backtest cannot run or stopped: an unknown prompt version, no decision log, a
    model that refuses the requests or stays unavailable, a view the current state cannot
    load. The message is for the operator."""


class BacktestRow(BaseModel):
    """One re-asked model call. Verdict classes: ``accepted``, ``rejected:<rule>``,
    ``malformed`` (``starter.ops.backtest_diff``); ``recorded_verdict`` is the recorded one, or
    the current policy's on the recorded proposal when none was recorded (``superseded``,
    a turn not yet recorded)."""

    conversation_id: str
    turn: int
    call_seq: int
    recorded_prompt_version: str
    recorded_model: str
    recorded_proposal: Optional[dict[str, Any]] = None
    recorded_verdict: str
    new_proposal: Optional[dict[str, Any]] = None
    new_verdict: str
    new_reason: str = ""
    """Why the policy rejected the new proposal, or why it is malformed."""
    result: Difference


class BacktestReport(BaseModel):
    """The rows in decision-log order and their counts; ``calls`` = same + different_proposal
    + different_verdict."""

    prompt_version: str
    model: str
    calls: int = 0
    same: int = 0
    different_proposal: int = 0
    different_verdict: int = 0
    rows: list[BacktestRow] = []

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` shape: ``{"calls", "same", "different_proposal", "different_verdict", "rows"}``."""
        return {"calls": self.calls, "same": self.same, "different_proposal": self.different_proposal,
                "different_verdict": self.different_verdict, "rows": [r.model_dump(mode="json") for r in self.rows]}


def check_prompt_version(name: str) -> str:
    """``name`` if it is a known prompt version; raises ``BacktestError`` naming the known ones."""
    try:
        return prompt_version(name).name
    except UnknownPromptVersion:
        raise BacktestError(f"unknown prompt version {name!r}; known: {', '.join(PROMPT_VERSIONS)}") from None


async def propose(client: AsyncAnthropic, view: dict[str, Any], conversation_id: str, *, prompt: str, model: str,
                  max_tokens: int) -> tuple[Optional[dict[str, Any]], str]:
    """Ask ``model`` for a proposal on ``view`` under prompt ``prompt``: ``(proposal JSON, "")``,
    or ``(None, why)`` when the output is malformed (as the activity would count it).
    Raises ``BacktestError`` when the request is refused or the model stays unavailable."""
    kwargs = build_create_kwargs(render_request(view, prompt), model=model, max_tokens=max_tokens,
                                 conversation_id=conversation_id, prompt_version=prompt)
    for attempt in range(1, MODEL_ATTEMPTS + 1):
        try:
            response = await client.messages.create(**kwargs)
        except sdk().AnthropicError as exc:
            error = map_api_error(exc)
            if error.non_retryable or attempt == MODEL_ATTEMPTS:
                raise BacktestError(f"the model call failed: {error.message}") from exc
            await asyncio.sleep(RETRY_DELAY_SECONDS * attempt)
            continue
        except TypeError as exc:  # the SDK's way of saying no credentials are configured
            raise BacktestError(f"the model call failed: {exc}") from exc
        try:
            return read_proposal(response).model_dump(mode="json"), ""
        except MalformedOutput as exc:
            return None, str(exc)
    raise AssertionError("unreachable")


async def compare(row: DecisionRow, client: AsyncAnthropic, *, prompt: str, model: str,
                  max_tokens: int) -> BacktestRow:
    """Re-ask one recorded call and classify it. Raises ``BacktestError``."""
    try:
        state = state_from_view(row.view)
    except UnreadableView as err:
        raise BacktestError(f"conversation {row.conversation_id}, turn {row.turn}, call {row.call_seq}: {err}") from err
    baseline = recorded_class(row.verdict, row.rule) or policy_class(state, row.proposal)[0]
    proposal, why = await propose(client, row.view, row.conversation_id, prompt=prompt, model=model,
                                  max_tokens=max_tokens)
    verdict, reason = policy_class(state, proposal)
    return BacktestRow(
        conversation_id=row.conversation_id, turn=row.turn, call_seq=row.call_seq,
        recorded_prompt_version=row.prompt_version, recorded_model=row.model, recorded_proposal=row.proposal,
        recorded_verdict=baseline, new_proposal=proposal, new_verdict=verdict, new_reason=why or reason,
        result=classify(row.proposal, baseline, proposal, verdict))


async def backtest(rows: Iterable[DecisionRow], client: AsyncAnthropic, *, prompt: str, model: str,
                   max_tokens: int = 1024, concurrency: int = 4,
                   progress: Optional[Callable[[BacktestRow], None]] = None) -> BacktestReport:
    """Re-ask every recorded call of ``rows`` (at most ``concurrency`` at once) under prompt
    version ``prompt`` and ``model``; ``progress`` is called with each finished row. Writes
    nothing. Raises ``BacktestError`` (unknown prompt version, a failing model, an unreadable view)."""
    prompt = check_prompt_version(prompt)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(row: DecisionRow) -> BacktestRow:
        async with gate:
            result = await compare(row, client, prompt=prompt, model=model, max_tokens=max_tokens)
        if progress is not None:
            progress(result)
        return result

    results = await asyncio.gather(*(one(r) for r in rows))
    report = BacktestReport(prompt_version=prompt, model=model, calls=len(results), rows=list(results))
    for r in results:
        setattr(report, r.result.value, getattr(report, r.result.value) + 1)
    return report


def _has_table(url: str, table: str) -> bool:
    """True when the database at ``url`` exists and holds ``table`` (a missing SQLite file
    is not created)."""
    parsed = sa.make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database and parsed.database != ":memory:" \
            and not Path(parsed.database).exists():
        return False
    engine = sa.create_engine(url)
    try:
        return sa.inspect(engine).has_table(table)
    finally:
        engine.dispose()


def load_decisions(settings: Settings, conversation_id: Optional[str] = None,
                   since: Optional[datetime] = None) -> list[DecisionRow]:
    """The decision log's rows (``Settings.resolved_journal_url()``), filtered. Raises
    ``BacktestError`` when there is no journal there (it is not created)."""
    url = settings.resolved_journal_url()
    if not _has_table(url, "model_calls"):
        raise BacktestError(f"no decision log at {sa.make_url(url).render_as_string(hide_password=True)}; "
                            "set STATEKEEPER_JOURNAL_URL to the workers' journal")
    store = JournalStore(url, create=False)
    try:
        return store.decisions(conversation_id=conversation_id, since=since)
    finally:
        store.close()


def model_client(settings: Settings, model: Optional[str] = None) -> tuple[AsyncAnthropic, str]:
    """The SDK client and model id the backtest asks: Anthropic with a key (default
    ``Settings.model``), else the offline stand-in (default its own name; it answers the same
    whatever the id) reading benchmark plans from the workers' database without writing it."""
    if not settings.offline:
        client = build_client(settings.anthropic_api_key, settings.anthropic_base_url, settings.model_timeout_seconds)
        return client, model or settings.model
    from systems.model.plans import PlanBook, plans_table
    from systems.retail.backend import make_engine

    url = settings.resolved_database_url()
    plans = PlanBook(make_engine(url)) if _has_table(url, plans_table.name) else None
    return offline_client(settings.model_timeout_seconds, plans=plans), model or settings.offline_model_name
