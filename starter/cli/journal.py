"""Journal commands of the ``statekeeper`` CLI: ``transcript``, ``decisions`` and
``journal erase`` / ``journal purge``.

They read the journal database directly (``Settings.resolved_journal_url()``; a detached
``statekeeper dev``'s data directory when one runs): no Temporal server is needed, and a
finished or long-gone conversation's transcript is still there until erased or purged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from activities.store.journal import DecisionRow, JournalStore, TranscriptEntry
from settings import MAX_DAYS
from starter.api.journal import transcript_text
from starter.cli.refusals import command_settings, given_id, storage_refusals, writable_output

console = Console()
journal_app = typer.Typer(help="Retention and erasure of the journal (decision log and transcripts).",
                          no_args_is_help=True)


@contextlib.contextmanager
def _store() -> Iterator[JournalStore]:
    settings = command_settings()  # from any directory: the detached dev's data directory
    with storage_refusals(settings):  # a damaged, locked or newer database: one line, not a traceback
        store = JournalStore(settings.resolved_journal_url())
        try:
            yield store
        finally:
            store.close()


def parse_since(value: Optional[str]) -> Optional[datetime]:
    """``--since`` as an aware datetime: an ISO date (``2026-11-23``, midnight UTC) or date
    and time, with or without an offset (naive is UTC). Raises ``ValueError`` for anything else."""
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"--since {value!r} is not an ISO date or date-time (e.g. 2026-11-23)") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def transcript_json(conversation_id: str, entries: list[TranscriptEntry]) -> dict:
    """The transcript as JSON: ``{"conversation_id", "entries": [TranscriptEntry, ...]}``."""
    return {"conversation_id": conversation_id, "entries": [e.model_dump(mode="json") for e in entries]}


def transcript(conversation_id: str = typer.Argument(..., help="Conversation id (as given when it was started; not the workflow id)."),
               as_json: bool = typer.Option(False, "--json", help="JSON instead of text.")) -> None:
    """Print a conversation's whole transcript: every user message and every reply, with turn and time."""
    given_id(conversation_id)
    with _store() as store:
        entries = store.transcript(conversation_id)
    if not entries:
        typer.echo(f"statekeeper: no transcript for conversation {conversation_id}", err=True)
        raise typer.Exit(1)
    if as_json:
        print(json.dumps(transcript_json(conversation_id, entries), indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(transcript_text(entries))


def _proposal(row: DecisionRow) -> str:
    p = row.proposal
    if p is None:
        return "-"
    if p.get("kind") == "tool_call":
        return f"{p['tool']['name']}"
    return str(p.get("kind"))


def decisions(conversation: Optional[str] = typer.Option(None, "--conversation", help="Only this conversation."),
              customer: Optional[str] = typer.Option(None, "--customer", help="Only this customer (real id)."),
              rule: Optional[str] = typer.Option(None, "--rule", help="Only verdicts under this policy rule."),
              since: Optional[str] = typer.Option(None, "--since", help="Only calls recorded at or after this ISO "
                                                                        "date/time (naive is UTC)."),
              jsonl: Optional[Path] = typer.Option(None, "--jsonl", help="Write the rows as JSON Lines here "
                                                                          "('-': standard output).")) -> None:
    """The decision log: each model call with its prompt version, model, proposal and the verdict on it."""
    for option, value in (("--conversation", conversation), ("--customer", customer), ("--rule", rule)):
        if value is not None and not value.strip():  # an unset shell variable: not "every conversation"
            typer.echo(f"statekeeper: {option} is empty; give a value or leave the option out", err=True)
            raise typer.Exit(2)
    try:
        when = parse_since(since)
    except ValueError as err:
        typer.echo(f"statekeeper: {err}", err=True)
        raise typer.Exit(2) from None
    writable_output(jsonl)  # refused before reading anything
    filters = {"conversation_id": conversation, "customer_id": customer, "rule": rule, "since": when}
    with _store() as store:
        if jsonl is not None:
            if str(jsonl) == "-":
                store.export_jsonl(sys.stdout, **filters)
                return
            with jsonl.open("w", encoding="utf-8") as out:
                count = store.export_jsonl(out, **filters)
            console.print(f"{count} decision(s) written to {jsonl}")
            return
        rows = store.decisions(**filters)
    console.print(decision_table(rows) if rows else no_decisions(conversation, customer, rule, since))


def no_decisions(conversation: Optional[str], customer: Optional[str], rule: Optional[str],
                 since: Optional[str]) -> str:
    """What ``decisions`` says when nothing matches: an empty twelve-column table squeezed to
    80 columns ("conv ersa tion", "pro mpt") was all a mistyped conversation id got."""
    scope = [f"conversation {conversation}" if conversation else "", "that customer" if customer else "",
             f"rule {rule}" if rule else ""]
    said = ", ".join(part for part in scope if part)
    # "since" reads on its own: "for since 2099-01-01" was what --since alone got
    return escape(f"no model calls in the decision log{f' for {said}' if said else ''}"
                  f"{f' since {since}' if since else ''}")


def decision_table(rows: list) -> Table:
    """The decision log as a table. A column whose value is the same in every row (the
    conversation when filtered by it, the prompt version, the model) is said once, in the
    caption, and long values fold: with all twelve columns an 80-column terminal would show "con…",
    "pr…", "ve…"."""
    columns = {"conversation": lambda r: r.conversation_id, "turn": lambda r: str(r.turn),
               "call": lambda r: str(r.call_seq), "prompt": lambda r: r.prompt_version, "model": lambda r: r.model,
               "proposal": _proposal, "stop": lambda r: r.stop_reason or "-", "verdict": lambda r: r.verdict or "-",
               "rule": lambda r: r.rule or "-", "outcome": lambda r: r.outcome or "-",
               "tokens in/out": lambda r: f"{r.input_tokens}/{r.output_tokens}",
               "cache read/write": lambda r: f"{r.cache_read_input_tokens}/{r.cache_creation_input_tokens}"}
    same = {name: values.pop() for name in ("conversation", "prompt", "model")
            if len(values := {columns[name](r) for r in rows}) == 1}
    shown = [name for name in columns if name not in same]
    table = Table(title=f"Decision log ({len(rows)} model calls)",
                  caption=escape(" · ".join(f"{name} {value}" for name, value in same.items())) or None)
    for name in shown:
        table.add_column(name, overflow="fold")
    for r in rows:
        table.add_row(*(escape(columns[name](r)) for name in shown))
    return table


@journal_app.command()
def erase(conversation: Optional[str] = typer.Option(None, "--conversation", help="Erase this conversation."),
          customer: Optional[str] = typer.Option(None, "--customer", help="Erase every conversation of this "
                                                                          "customer (real id).")) -> None:
    """Erase a conversation's or a customer's decision log and transcripts (right to erasure)."""
    if (conversation is None) == (customer is None):
        typer.echo("statekeeper: give exactly one of --conversation ID or --customer ID", err=True)
        raise typer.Exit(2)
    for option, value in (("--conversation", conversation), ("--customer", customer)):
        if value is not None and not value.strip():  # an unset shell variable: "erased 0" read as done
            typer.echo(f"statekeeper: {option} is empty; give the id whose records to erase", err=True)
            raise typer.Exit(2)
    with _store() as store:
        erased = (store.erase_conversation(conversation) if conversation is not None
                  else store.erase_customer(customer or ""))
    console.print(f"erased {erased.conversations} conversation(s): {erased.model_calls} model calls, "
                  f"{erased.verdicts} verdicts, {erased.transcript} transcript entries")


@journal_app.command()
def purge(older_than_days: float = typer.Option(..., "--older-than-days", min=0, max=MAX_DAYS,
                                                help="Remove conversations whose newest record is older.")) -> None:
    """Remove whole conversations whose newest journal record is older than N days (retention);
    conversations still running are kept (Temporal is asked)."""
    cutoff = datetime.now(timezone.utc) - timedelta(days=older_than_days)
    with _store() as store:
        stale = store.stale_conversations(cutoff)
        running = _still_running(stale) if stale else set()
        erased = store.purge(cutoff, keep=running)
    console.print(f"purged {erased.conversations} conversation(s) older than {older_than_days:g} day(s): "
                  f"{erased.model_calls} model calls, {erased.verdicts} verdicts, "
                  f"{erased.transcript} transcript entries"
                  + (f"; kept {len(running)} still running" if running else ""))


def _still_running(conversation_ids: set[str]) -> set[str]:
    """The running ones among ``conversation_ids``; when Temporal cannot tell, the purge is
    refused whole (status 2, one line) rather than made blind."""
    # late: the Temporal client and the dev server's code are not needed when nothing is stale
    from temporalio.service import RPCError

    from starter.dev.server import DevServerError
    from starter.runtime.preflight import StartupRefused
    from starter.ops.running_conversations import running_conversations

    try:
        return asyncio.run(running_conversations(command_settings(), conversation_ids))
    except (StartupRefused, DevServerError, RPCError) as err:
        reason = str(err) if not isinstance(err, RPCError) else "Temporal did not answer"
        typer.echo(f"statekeeper: nothing was purged: whether a conversation still runs is Temporal's to say. "
                   f"{reason}", err=True)
        raise typer.Exit(2) from None
