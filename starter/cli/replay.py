"""``statekeeper replay-check ID``, ``statekeeper resume ID`` and ``statekeeper resolve ID``:
the safe-replay decision (``starter.ops.replay_check``) as a rich table or JSON, a reset that
happens only on a ``resume`` verdict, and an operator's resolution of an escalated unknown
outcome (``workflows.conversation.resolution``). They need Temporal and the databases and services the
workers use (the same ``STATEKEEPER_*`` settings), not a worker, except ``resolve``, whose
update a worker runs."""

from __future__ import annotations

import asyncio
import json
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from starter.cli.refusals import given_id
from starter.ops.replay_check import ReplayReport, Systems, check
from starter.ops.replay_resume import ResumeRefused, resume as reset_run

_ID = typer.Argument(..., help="The conversation id (or its workflow id support-ID).")
_JSON = typer.Option(False, "--json", help="Print the report as JSON instead of a table.")


async def _report(settings, conversation_id: str) -> tuple[ReplayReport, object]:
    from starter.runtime.connection import connect

    client = await connect(settings)
    systems = await asyncio.to_thread(Systems.from_settings, settings)
    try:
        return await check(client, conversation_id, systems), client
    finally:
        systems.close()


def _print(report: ReplayReport) -> None:
    from starter.cli.support import console

    console.print(f"conversation [bold]{escape(report.conversation_id)}[/] (run {report.run_id or '-'}, "
                  f"{report.run_status or 'not found'}); original input "
                  f"{'known' if report.input_known else '[red]not known[/]'}", highlight=False)
    if report.effects:
        console.print(_effects_table(report))
    else:  # an empty eight-column table squeezed to 80 columns said nothing
        console.print("effects invoked (writes, emails, tickets): none", highlight=False)
    if report.harmless:
        console.print("harmless (read, model, journal upsert): " +
                      ", ".join(f"{name} ×{count}" for name, count in sorted(report.harmless.items())))
    colour = "green" if report.verdict == "resume" else "red"
    console.print(f"verdict: [bold {colour}]{report.verdict}[/]", highlight=False)
    for reason in report.reasons:
        console.print(f"  - {escape(reason)}", highlight=False)


def _effects_table(report: ReplayReport) -> Table:
    table = Table(title="Effects invoked (history) and what the systems hold")
    for column in ("workflow", "event", "activity", "system", "key", "ended", "evidence", "status"):
        table.add_column(column, overflow="fold")  # folded, never elided: keys and reasons are read whole
    colours = {"deduplicated": "green", "harmless": "green", "resolved": "green", "unknown": "red", "unproven": "red"}
    for e in report.effects:
        table.add_row(escape(e.workflow_id), str(e.event_id), e.activity, e.system, escape(e.key or "?"),
                      e.ended + (f" ({e.failure_type})" if e.failure_type else ""), escape("; ".join(e.evidence)),
                      f"[{colours[e.status]}]{e.status}[/]: {escape(e.reason)}")
    return table


def replay_check(conversation_id: str = _ID, json_out: bool = _JSON) -> None:
    """Whether a conversation's run may be resumed safely: its original input, the effects it
    invoked and what the ledgers and services hold of each, and a verdict (resume|refuse)
    with reasons. Exit status 0 for resume, 1 for refuse."""
    from starter.cli.support import interruptible
    from starter.cli.refusals import command_settings

    given_id(conversation_id)  # empty: refused before connecting, as `state` refuses it
    settings = command_settings()
    with interruptible(130):
        report, _client = asyncio.run(_report(settings, conversation_id))
    if json_out:
        print(report.model_dump_json(indent=2))
    else:
        _print(report)
    if report.verdict != "resume":
        raise typer.Exit(1)


def resume(conversation_id: str = _ID, json_out: bool = _JSON) -> None:
    """Reset a conversation's run to its last completed workflow task, only when replay-check's
    verdict is resume; otherwise change nothing, print the reasons and exit with status 1."""
    from starter.cli.support import interruptible, console, errors
    from starter.cli.refusals import command_settings

    given_id(conversation_id)
    settings = command_settings()

    async def main() -> tuple[ReplayReport, Optional[str]]:
        report, client = await _report(settings, conversation_id)
        try:
            return report, await reset_run(client, report)
        except ResumeRefused:
            return report, None

    with interruptible(130):
        report, run_id = asyncio.run(main())
    if json_out:
        print(json.dumps({"resumed": run_id is not None, "new_run_id": run_id,
                          "report": report.model_dump(mode="json")}, indent=2))
    elif run_id is None:
        _print(report)
    if run_id is None:
        errors.print("[red]statekeeper resume: refused; nothing was changed[/]", highlight=False)
        raise typer.Exit(1)
    if not json_out:
        console.print(f"[green]resumed[/]: run {report.run_id} reset to workflow task event {report.reset_event_id}; "
                      f"new run {run_id}", highlight=False)


def resolve(conversation_id: str = _ID,
            step: str = typer.Option(..., "--step", help="The step id (steps[].step_id of `statekeeper state`)."),
            outcome: str = typer.Option(..., "--outcome", help="applied or not_applied, as the system shows it."),
            operator: str = typer.Option(..., "--operator", help="Your operator id (recorded in the state)."),
            note: str = typer.Option(..., "--note", help="What you checked (recorded; 1-1000 characters).")) -> None:
    """Resolve an escalated unknown outcome as applied or not_applied after checking the system;
    the user is told and the conversation goes on. Exit status 2 for a malformed resolution
    (refused before connecting, as other commands refuse bad input), 1 when the conversation
    refuses it."""
    from starter.cli.support import interruptible, console, errors
    from starter.cli.refusals import command_settings
    from starter.client.conversations import ConversationError
    from starter.ops.bootstrap import client_for
    from starter.runtime.connection import connect

    from starter.client.resolutions import resolution_payload

    given_id(conversation_id)
    settings = command_settings()
    try:  # refused before connecting: a wrong --outcome need not wait for Temporal
        resolution_payload(step, outcome, operator, note, "cli")
    except ConversationError as err:
        errors.print(f"[red]statekeeper resolve: {escape(str(err))}[/]", highlight=False)
        raise typer.Exit(2) from None

    async def main():
        from starter.client.conversation_ids import conversation_named

        connected = await connect(settings)
        client = client_for(connected, settings)
        return await client.resolve_outcome(await conversation_named(connected, conversation_id), step, outcome,
                                            operator, note, actor="cli")

    with interruptible(130):
        try:
            record = asyncio.run(main())
        except ConversationError as err:
            errors.print(f"[red]statekeeper resolve: {escape(str(err))}[/]", highlight=False)
            raise typer.Exit(1) from None
    console.print(f"step {escape(record.step_id)} resolved as {record.outcome} by {escape(record.operator)}; "
                  f"the user was told: {escape(record.told)}", highlight=False)
