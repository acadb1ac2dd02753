"""The ``statekeeper`` command line: dev, worker, api, chat, state, taubench, link, backtest; the
journal's transcript, decisions and journal erase/purge (``starter.cli.journal``); erase and
retention purge/schedule (``starter.cli.erasure``); replay-check, resume and resolve
(``starter.cli.replay``); worker-health and stuck (``starter.cli.health``); webhooks
(``starter.cli.webhooks.commands``); approvals (here:
the approvals awaiting a supervisor, ``approval_table``)."""

from __future__ import annotations

from starter.cli import startup_signals

startup_signals.hold()  # a Ctrl-C while the imports below load: "stopped.", status 130, no traceback

import asyncio
import json
import signal
import sys
import uuid
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

import typer
from rich.console import Console, Group
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from settings import Settings
from starter.cli.backtest import backtest
from starter.cli.refusals import command_settings, given_id, write_output, writable_output
from starter.cli.support import agent_line, as_ctrl_c, console, errors, interruptible, one_line_summaries, typed_line, ui_url
from starter.client.conversations import ConversationError
from starter.ops.bootstrap import client_for
from starter.cli.codec import codec_server
from starter.client.conversation_ids import conversation_named
from starter.cli.dev import dev, stop
from starter.cli.erasure import erase, retention_app
from starter.cli.journal import decisions, journal_app, transcript
from starter.cli.keys import keys_app
from starter.cli.memory.commands import memory_app
from starter.cli.webhooks.commands import webhooks_app
from starter.cli.links import link
from starter.runtime.logs import cli_logging, configure_logging
from starter.cli.health import stuck, worker_health
from starter.cli.migrate import migrate
from starter.runtime.process_exit import run_and_exit
from starter.runtime.stop_signals import stop_signals
from starter.cli.replay import replay_check, resolve, resume
from starter.dev.stack import runtime
from starter.ops.taubench import TauBenchRunner, load_tasks, report_json

if TYPE_CHECKING:
    from starter.client.approvals import ApprovalItem

app = typer.Typer(help="Durable, LLM-driven retail support conversations on Temporal.", no_args_is_help=True)
app.command()(dev)
app.command()(stop)
app.command()(link)
app.command()(transcript)
app.command()(decisions)
app.add_typer(journal_app, name="journal")
app.add_typer(keys_app, name="keys")
app.add_typer(memory_app, name="memory")
app.add_typer(webhooks_app, name="webhooks")
app.command()(backtest)
app.command()(erase)
app.add_typer(retention_app, name="retention")
app.command("codec-server")(codec_server)
app.command()(migrate)
app.command("worker-health")(worker_health)
app.command("replay-check")(replay_check)
app.command()(resume)
app.command()(resolve)
app.command()(stuck)
app.callback()(cli_logging)
startup_signals.release()  # loaded: each command's own Ctrl-C and SIGTERM handling from here on


def _conversation_url(settings: Settings, conversation_id: str) -> str:
    """The Web UI list filtered to the conversation's runs (the workflow list when its id cannot
    go into a list query: ``starter.cli.links.SAFE_VALUE``)."""
    from starter.cli.links import SAFE_VALUE, list_url
    from workflows.conversation.workflow import support_workflow_id

    workflow_id = support_workflow_id(conversation_id)
    if not SAFE_VALUE.fullmatch(workflow_id):
        return ui_url(settings)
    return list_url(f"http://127.0.0.1:{settings.ui_port}", settings.temporal_namespace, f'WorkflowId="{workflow_id}"')


@app.command()
def worker() -> None:
    """Run a worker against the configured Temporal server."""
    from starter.runtime.worker import main, run_worker

    settings = command_settings()
    # like `python worker.py`: graceful shutdown on SIGTERM/SIGINT, then exit without joining a
    # database thread that may never return
    main(lambda: run_worker(settings))


@app.command()
def api(host: Optional[str] = typer.Option(None, help="Interface to listen on (default STATEKEEPER_API_HOST)."),
        port: Optional[int] = typer.Option(None, min=1, max=65535, help="TCP port (default STATEKEEPER_API_PORT).")) -> None:
    """Serve the HTTP API for backend services (OpenAPI at /docs) against the configured Temporal server."""
    from starter.api.server import serve

    configure_logging("INFO")
    settings = command_settings()
    with interruptible():
        serve(settings, host or settings.api_host, settings.api_port if port is None else port,
              announce=lambda line: console.print(escape(line), highlight=False))


@app.command()
def chat(conversation_id: Optional[str] = typer.Option(None, help="Resume or name a conversation.")) -> None:
    """Chat interactively with a support conversation (offline rule-based stand-in without an API key)."""
    settings = command_settings()

    async def main() -> None:
        async with runtime(settings) as rt:
            client = client_for(rt.client, settings)
            try:
                cid = await client.start_conversation(conversation_id or f"chat-{uuid.uuid4().hex[:8]}")
            except ConversationError as err:  # e.g. a finished id: a page of traceback before
                errors.print(f"[red]statekeeper: {escape(str(err))}[/]", highlight=False)
                raise typer.Exit(1)
            console.print(f"conversation [bold]{escape(cid)}[/] — Web UI {escape(_conversation_url(settings, cid))}. "
                          "Type 'quit' to leave.", soft_wrap=True)  # a URL cut by a line break is not a link
            if settings.offline:
                console.print("[dim]Offline stand-in model: type your email, #W order ids, item ids, "
                              "payment method ids, and yes/no.[/]")
            while True:
                try:
                    text = await typed_line("[bold cyan]you>[/] ")
                except EOFError:  # Ctrl-D, or the end of piped input: as "quit" (it was "Aborted.", status 1)
                    console.print()
                    return
                if text.strip().lower() in ("quit", "exit"):
                    return
                try:
                    reply = await client.send_message(cid, text)
                except ConversationError as err:
                    console.print(f"[red]{escape(str(err))}[/]")
                    continue
                console.print(agent_line(reply.text))
                if reply.status != "active":
                    console.print(f"[dim]conversation {reply.status}[/]")
                    return

    with interruptible():
        asyncio.run(main())


@app.command()
def state(conversation_id: str) -> None:
    """Print a conversation's typed state as JSON (ID as given to `chat`/the client, or the
    workflow id `support-ID`). Starts the embedded server and a worker if none is running."""
    given_id(conversation_id)
    settings = command_settings()

    async def main() -> None:
        async with runtime(settings) as rt:
            try:
                named = await conversation_named(rt.client, conversation_id)  # "support-x" may be x's or its own
                current = await client_for(rt.client, settings).state(named)
            except ConversationError as err:
                errors.print(f"[red]statekeeper: {escape(str(err))}[/]", highlight=False)
                raise typer.Exit(1)
            print(current.model_dump_json(indent=2))

    with interruptible(130):
        asyncio.run(main())


NONE_PENDING = "no approvals await a decision"
"""What ``approvals`` prints when none waits."""
UNREADABLE = "(its process could not be read just now: statekeeper approvals again, or GET /approvals/{id})"
"""The detail of an approval whose process did not answer (``ApprovalItem`` with its ids only)."""


def _when(moment: Optional[datetime]) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S}" if moment else "-"


def approval_table(items: Sequence[ApprovalItem]) -> Group:
    """``items`` as tables, one an approval, one row a field (eight columns side by side are
    unreadable at 80 columns; this reads at any width). Every value is escaped (a detail names
    options like "[color white]", which rich would read as markup) and long values fold, never
    "…"; the approval id, what a decision names, comes first."""
    tables = []
    for number, item in enumerate(items, 1):
        table = Table(title=f"Approval {number} of {len(items)} awaiting a decision", show_header=False,
                      title_justify="left")
        table.add_column("field", no_wrap=True, style="bold")
        table.add_column("value", overflow="fold")
        operation = item.operation
        rows = [("approval id", item.approval_id), ("process", f"{item.process} {item.process_id}")]
        if operation is None:
            rows.append(("detail", UNREADABLE))
        else:
            rows += [("write", f"{operation.tool} on order {operation.order_id}"), ("amount", str(operation.amount)),
                     ("detail", operation.detail or "-"), ("reason", item.reason or "-"),
                     ("requested", _when(item.requested_at)), ("expires", _when(item.expires_at))]
        for name, value in rows:
            table.add_row(name, escape(value))
        tables.append(table)
    return Group(*tables, "times UTC; decide with POST /approvals/{approval id} (an operator key)")


@app.command()
def approvals(json_out: bool = typer.Option(False, "--json", help="Print the approvals as a JSON list."),
              limit: int = typer.Option(100, "--limit", min=1, max=100, help="List at most this many.")) -> None:
    """List the approvals awaiting a supervisor's decision: the write, its amount and detail, the reason, the expiry.

    Each is read from its process (a worker answers), every tenant's: an operator's command on
    the Temporal connection, as ``stuck``. Exit status 0 (also when none waits), 1 with one line
    on stderr when Temporal cannot be asked."""
    from starter.cli.refusals import fail
    from starter.client.approvals import ApprovalItem
    from starter.runtime.connection import connect
    from starter.runtime.preflight import StartupRefused

    settings = command_settings()

    async def main() -> list[ApprovalItem]:
        client = client_for(await connect(settings), settings)
        page = await client.list_pending_approvals(limit=limit)
        return [item for item in page.items if isinstance(item, ApprovalItem)]

    try:
        items = asyncio.run(main())
    except (StartupRefused, ConversationError) as err:
        raise fail(str(err), 1)
    if json_out:
        print(json.dumps([item.model_dump(mode="json") for item in items], indent=2))
    elif not items:
        Console().print(NONE_PENDING, highlight=False)
    else:
        Console().print(approval_table(items))


@app.command()
def taubench(
    tasks: Path = typer.Option(..., exists=True, dir_okay=False, help="A τ-bench task file (JSON list)."),
    limit: Optional[int] = typer.Option(None, min=1, help="Run only the first N tasks."),
    concurrency: int = typer.Option(4, min=1, help="Conversations at once."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the report as JSON here."),
    keep_stores: bool = typer.Option(False, help="Keep each task's store in the database."),
) -> None:
    """Run τ-bench tasks through durable conversations and check the final data hash."""
    settings = command_settings()
    writable_output(json_out)  # refused now, not after the run
    try:
        task_list = load_tasks(tasks, limit)
    except ValueError as err:
        errors.print(f"[red]statekeeper: {escape(str(err))}[/]", highlight=False)
        raise typer.Exit(2)

    run_id = uuid.uuid4().hex[:8]  # its conversations are tb-<run_id>-<task index>

    async def main() -> tuple[dict, bool]:
        async with runtime(settings) as rt:
            client = client_for(rt.client, settings)
            runner = TauBenchRunner(client, rt.backend, run_id=run_id, keep_stores=keep_stores)
            columns = (TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("passed {task.fields[passed]}"), TimeElapsedColumn())
            with Progress(*columns, console=console) as progress:
                bar = progress.add_task("τ-bench", total=len(task_list), passed=0)
                passed = 0

                def advance(result) -> None:
                    nonlocal passed
                    passed += result.passed
                    progress.update(bar, advance=1, passed=passed)

                report = await runner.run(task_list, concurrency=concurrency, progress=advance)
            return report_json(report), rt.started_server

    with interruptible(130):
        result, started_server = asyncio.run(main())
        webhooks = _webhook_deliveries(settings, run_id)
    _print_report(result, settings, started_server, webhooks)
    if result["tasks"]:  # the ids were nowhere in the output: `transcript` needs one
        console.print(f"conversations tb-{run_id}-<task index>, e.g. `statekeeper transcript "
                      f"tb-{run_id}-{result['tasks'][0]['task_index']}`", highlight=False)
    if json_out:
        write_output(json_out, json.dumps(result, indent=2))
        console.print(f"report written to {json_out}")
    if result["summary"]["passed"] < result["summary"]["total"]:
        raise typer.Exit(1)


WEBHOOK_DRAIN_SECONDS = 60.0
"""How long ``taubench`` waits for a background webhook listener to get the run's events."""


def _webhook_deliveries(settings: Settings, run_id: str):  # noqa: ANN202 (DrainReport, imported lazily)
    """The run's deliveries to a background `statekeeper webhooks listen` (``make demo``), once
    drained (bounded by ``WEBHOOK_DRAIN_SECONDS``); None without one."""
    from starter.dev.listener import await_deliveries

    try:
        return await_deliveries(settings, f"tb-{run_id}-", WEBHOOK_DRAIN_SECONDS)
    except Exception:  # the summary does without it; the run's own result stands
        return None


def _print_report(result: dict, settings: Settings, started_server: bool, webhooks=None) -> None:  # noqa: ANN001
    failed = [t for t in result["tasks"] if not t["passed"]]
    if failed:
        table = Table(title="Failed tasks")
        for col in ("task", "hash", "outputs", "reason"):
            table.add_column(col)
        for t in failed:
            table.add_row(str(t["task_index"]), str(t["hash_match"]), str(t["outputs_match"]), escape(t["reason"]))
        console.print(table)
    refused = [t for t in result["tasks"] if t["passed"] and t["policy_refusals"]]
    if refused:
        table = Table(title="Passed, with ground-truth actions our policy refused (the benchmark's tool errors too)")
        table.add_column("task")
        table.add_column("refusal")
        for t in refused:
            table.add_row(str(t["task_index"]), escape("; ".join(t["policy_refusals"])))  # "[rule]" is not markup
        console.print(table)
    s = result["summary"]
    table = Table(title="τ-bench summary")  # one row a measure: readable in any terminal's width
    table.add_column("measure")
    table.add_column("value", justify="right")
    for measure, value in (
            ("tasks", str(s["total"])),
            ("passed", f"{s['passed']} ({100 * s['passed'] / max(1, s['total']):.1f}%)"),
            ("hash matches", str(s["hash_match"])),
            ("writes", str(s["writes"])),
            ("duplicate writes", str(s["duplicate_writes"])),
            ("approvals granted", str(s.get("approvals_granted", 0))),
            ("model calls", str(s.get("model_calls", 0))),
            ("user messages", str(s.get("user_messages", 0))),
            ("model calls / message", f"{s.get('model_calls_per_message', 0):.2f}"),
            ("model calls / task", f"{s.get('model_calls_per_task', 0):.2f}"),
            ("seconds", f"{s['seconds']:.1f}")):
        table.add_row(measure, value)
    if webhooks is not None:  # a background `statekeeper webhooks listen` received the run's events
        table.add_row("webhook events delivered", str(webhooks.delivered))
        table.add_row("verified by the listener", str(webhooks.verified))
        table.add_row("webhook events failed", str(webhooks.failed)
                      + (f" ({webhooks.pending} still pending)" if webhooks.pending else ""))
        if webhooks.bad_signature:
            table.add_row("refused (bad signature)", str(webhooks.bad_signature))
    console.print(table)
    if started_server:
        console.print(f"Web UI: {ui_url(settings)} was up during the run; the embedded server stopped with it. "
                      "Run `statekeeper dev --detach` first to keep it.")
    else:
        console.print(f"Web UI: {ui_url(settings)}  (search e.g. WorkflowType=\"SupportWorkflow\" or CustomerId)")


one_line_summaries(app)  # after every command above is registered


def main() -> None:
    """The ``statekeeper`` console script: runs the command, then ends the process through
    ``starter.runtime.process_exit.exit_now`` (the SDK's native threads can crash the interpreter's
    teardown after a command that used a Temporal client). SIGTERM (``kill``, ``docker
    stop``, systemd) ends a command as Ctrl-C does, at any point, so the embedded server,
    worker and services it started stop with it (by default the process would die at once and leave
    the embedded Temporal server running with its ports); ``worker`` shuts down gracefully on
    either. SIGHUP (a closed terminal, a dropped ssh connection) too, unless ignored (``nohup``):
    by default it kills a chat outright and leaves the embedded server it started running (in a session of
    its own, the hangup does not reach it)."""
    for sig in stop_signals():  # SIGTERM, and SIGHUP unless ignored: as Ctrl-C
        if sig != signal.SIGINT:
            signal.signal(sig, as_ctrl_c)
    run_and_exit(lambda: app(sys.argv[1:]))


if __name__ == "__main__":
    main()
