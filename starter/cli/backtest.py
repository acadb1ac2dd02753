"""The ``statekeeper backtest`` command: progress bar, difference and summary tables, ``--json``.

The engine is ``starter.ops.backtest``; this module only reads the options, shows progress
and prints. Exit status 0 when the backtest ran (differences are its result, not an
error), 2 when it could not run (``BacktestError``, a bad ``--since``).
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from settings import Settings
from starter.cli.journal import parse_since as journal_since
from starter.ops.backtest import BacktestError, BacktestReport, backtest as run_backtest
from starter.ops.backtest import check_prompt_version, load_decisions, model_client
from starter.ops.backtest_diff import Difference, describe
from starter.cli.refusals import command_settings, given_id, storage_refusals, writable_output, write_output
from starter.cli.support import errors
from workflows.domain.prompt import PROMPT_VERSION

console = Console()


def parse_since(value: Optional[str]) -> Optional[datetime]:
    """``--since`` (``journal_cli.parse_since``). Raises ``BacktestError`` for a bad value."""
    try:
        return journal_since(value)
    except ValueError as err:
        raise BacktestError(str(err)) from None


def backtest(
    prompt_version: str = typer.Option(PROMPT_VERSION, "--prompt-version", help="Prompt version to render with."),
    model: Optional[str] = typer.Option(None, "--model", help="Model id (default STATEKEEPER_MODEL; offline: the "
                                                              "stand-in, which answers alike for any id)."),
    since: Optional[str] = typer.Option(None, "--since", help="Only calls recorded at or after this ISO date/time."),
    conversation: Optional[str] = typer.Option(None, "--conversation", help="Only this conversation's calls."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the report as JSON here."),
    concurrency: int = typer.Option(4, min=1, help="Model calls at once."),
    show: int = typer.Option(30, min=0, help="Differing calls listed in the table (all are in --json)."),
) -> None:
    """Re-ask recorded model calls with another prompt version or model, validate the answers
    with the current policy, and compare; executes nothing."""
    if conversation is not None:  # an unset shell variable re-asked every conversation's calls
        given_id(conversation)
    settings = command_settings()
    writable_output(json_out)  # refused before the model calls, not after them
    try:
        prompt = check_prompt_version(prompt_version)
        with storage_refusals(settings):  # a damaged or unreachable journal: one line, not a traceback
            rows = load_decisions(settings, conversation_id=conversation,
                                  since=parse_since(since))
        report = asyncio.run(_run(settings, rows, prompt, model, concurrency))
    except BacktestError as err:
        errors.print(f"[red]statekeeper backtest: {escape(str(err))}[/]", highlight=False)
        raise typer.Exit(2)
    print_report(report, show)
    if json_out:
        write_output(json_out, json.dumps(report.as_json(), indent=2))
        console.print(f"report written to {json_out}")


async def _run(settings: Settings, rows: list, prompt: str, model: Optional[str], concurrency: int) -> BacktestReport:
    client, model_id = model_client(settings, model)
    columns = (TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("same {task.fields[same]}"), TimeElapsedColumn())
    try:
        with Progress(*columns, console=console) as progress:
            bar = progress.add_task(f"backtest {prompt}", total=len(rows), same=0)
            same = 0

            def advance(row) -> None:
                nonlocal same
                same += row.result is Difference.SAME
                progress.update(bar, advance=1, same=same)

            return await run_backtest(rows, client, prompt=prompt, model=model_id,
                                      max_tokens=settings.model_max_tokens, concurrency=concurrency, progress=advance)
    finally:
        await client.close()


def print_report(report: BacktestReport, show: int = 30) -> None:
    """The differing calls (the first ``show``) and the summary, as rich tables."""
    differing = [r for r in report.rows if r.result is not Difference.SAME]
    if differing and show:
        table = Table(title=f"Calls that differ under {report.prompt_version} / {report.model}")
        for col in ("conversation", "turn.call", "recorded → verdict", "new → verdict", "difference"):
            table.add_column(col, overflow="fold")
        for r in differing[:show]:
            table.add_row(escape(r.conversation_id), f"{r.turn}.{r.call_seq}",
                          escape(f"{describe(r.recorded_proposal)} → {r.recorded_verdict}"),
                          escape(f"{describe(r.new_proposal)} → {r.new_verdict}"), r.result.value.replace("_", " "))
        console.print(table)
        if len(differing) > show:
            console.print(f"... and {len(differing) - show} more (see --json)")
    table = Table(title="Backtest summary")
    for col in ("calls", "same", "different proposal", "different verdict"):
        table.add_column(col, justify="right")
    table.add_row(str(report.calls), str(report.same), str(report.different_proposal), str(report.different_verdict))
    console.print(table)
    if not report.calls:  # a 0/0 table alone read as a broken run
        console.print("no recorded model call matched the selection (--conversation, --since): nothing was re-asked")
