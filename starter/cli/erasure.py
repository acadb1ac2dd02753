"""``statekeeper erase --customer ID`` and ``statekeeper retention purge`` / ``schedule``.

Both act through ``activities.erasure.DataErasure`` (built by ``worker.build_erasure``) on the
system of record, the journal and Temporal (the embedded server is started when none is
reachable, as for ``state``: its history holds the runs to delete), and leave an audit entry.
``retention schedule`` creates or updates a Temporal Schedule that starts
``RetentionWorkflow`` on the task queue every interval, run by the deployment's workers.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from typing import Awaitable, Callable, Optional, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
)
from temporalio.service import RPCError, RPCStatusCode

from activities.erasure.service import CUSTOMER_ID, ID_RULE, ErasureReport, RunningWork
from settings import MAX_DAYS, Settings
from starter.cli.refusals import command_settings
from starter.cli.support import errors
from starter.runtime.connection import connect
from starter.dev.server import DevServerError
from starter.cli.links import LinkError, pseudonym_key
from starter.runtime.preflight import StartupRefused
from starter.dev.stack import runtime
from workflows.retention.workflow import PurgeSummary, RetentionInput, RetentionWorkflow
from workflows.domain.user_text import id_problem

T = TypeVar("T")
console = Console()
retention_app = typer.Typer(help="Retention of closed conversations (STATEKEEPER_RETENTION_DAYS).",
                            no_args_is_help=True)
SCHEDULE_ID = "statekeeper-retention"
"""The Temporal Schedule of the retention purge; its runs are ``retention-purge-<time>``."""
DELETION_NOTE = "Temporal accepted the deletions; it removes the histories shortly (within a minute or so). "
KEPT_NOTE = "The system of record's customer profile and orders are its own records and are kept."
NOTHING_NOTE = ("Nothing of this customer was found: already erased, or an id no conversation or refund used "
                "(the system of record's user id, e.g. raj_sanchez_2970). ")


def erasure_note(report: ErasureReport) -> str:
    """What to make of an erasure's counts: Temporal's deletions are said to be under way only
    when there were some (an erasure that found nothing said 'Temporal accepted the deletions'
    too, and gave a mistyped id no hint), and the store's own records are kept."""
    r = report.records
    counts = (report.conversations, report.workflow_runs, report.journal_rows, report.memory_facts,
              r.ledger_deleted, r.ledger_anonymised, r.outbox_deleted, r.tickets_deleted)
    if not any(counts):
        return NOTHING_NOTE + KEPT_NOTE
    return (DELETION_NOTE if report.workflow_runs else "") + KEPT_NOTE


def _fail(message: str, code: int) -> typer.Exit:
    errors.print(f"[red]statekeeper: {escape(message)}[/]", highlight=False)
    return typer.Exit(code)


def _run(main: Callable[[], Awaitable[T]]) -> T:
    # a server that cannot be started or a refused preflight is a message, not a traceback
    try:
        return asyncio.run(main())
    except (StartupRefused, DevServerError) as err:
        raise _fail(str(err), 2) from None


MAX_ACTOR = 128
"""An actor's name fits the audit log's column (200) whole."""


def _check_actor(actor: str) -> None:
    """Refuse (status 2, before anything runs) an ``--actor`` that would make the audit entry
    name nobody: empty, a control character, or longer than ``MAX_ACTOR``."""
    if not actor.strip() or len(actor) > MAX_ACTOR or id_problem(actor, "--actor") is not None:
        raise _fail(f"--actor is who asks, for the audit log: 1-{MAX_ACTOR} characters, no control characters", 2)


def erase(customer: str = typer.Option(..., "--customer", help="The real customer id, e.g. raj_sanchez_2970."),
          terminate_running: bool = typer.Option(
              False, "--terminate-running",
              help="Terminate the customer's running conversations and refunds first (no compensation runs) "
                   "instead of refusing."),
          actor: str = typer.Option("cli", "--actor", help="Who asks, for the audit log.")) -> None:
    """Erase a customer's data: journal, ledger, emails, tickets and their closed workflows in Temporal."""
    from starter.runtime.worker import build_erasure  # late: the worker pulls in every activity

    _check_actor(actor)
    settings = command_settings()
    if not CUSTOMER_ID.fullmatch(customer):  # refused before any server is started
        raise _fail(ID_RULE, 2)
    try:
        pseudonym_key(settings)  # a clear message when there is no key to find their runs with
    except LinkError as err:
        raise _fail(str(err), 2)

    async def main():
        async with runtime(settings, with_worker=False) as rt:
            erasure = build_erasure(rt.client, settings, rt.backend)
            return await erasure.erase_customer(customer, actor, terminate_running=terminate_running)

    try:
        report = _run(main)
    except ValueError as err:
        raise _fail(str(err), 2)
    except RunningWork as err:
        raise _fail(str(err), 1)
    r = report.records
    console.print(f"erased customer [bold]{report.pseudonym}[/]: {report.conversations} conversation(s); "
                  f"Temporal: {report.workflow_runs} run(s) deleted ({report.terminated} terminated); "
                  f"journal: {report.journal_rows} row(s); ledger: {r.ledger_deleted} deleted, "
                  f"{r.ledger_anonymised} anonymised; emails: {r.outbox_deleted}; tickets: {r.tickets_deleted}; "
                  f"remembered facts: {report.memory_facts}.",
                  highlight=False)
    console.print(erasure_note(report), style="dim")


def purge_report(summary: PurgeSummary) -> str:
    """One line of a purge's counts, for people."""
    s = summary
    return (f"purged {s.conversations} closed conversation(s): Temporal {s.workflow_runs} run(s) deleted; "
            f"journal {s.journal_rows} row(s); ledger {s.ledger_deleted} deleted, {s.ledger_anonymised} anonymised; "
            f"emails {s.outbox_deleted}; tickets {s.tickets_deleted}; expired remembered facts {s.memory_facts}")


def _retention_days(settings: Settings, override: Optional[float], option: bool = True) -> float:
    days = settings.retention_days if override is None else override
    if days is None:
        hint = " or pass --older-than-days" if option else ""
        raise _fail(f"retention is off: set STATEKEEPER_RETENTION_DAYS{hint}", 2)
    return days


@retention_app.command()
def purge(older_than_days: Optional[float] = typer.Option(
              None, "--older-than-days", min=0, max=MAX_DAYS, help="Override STATEKEEPER_RETENTION_DAYS for this run."),
          actor: str = typer.Option("cli", "--actor", help="Who asks, for the audit log.")) -> None:
    """Purge closed conversations older than the retention period, everywhere statekeeper keeps them."""
    from starter.runtime.worker import build_erasure

    _check_actor(actor)
    settings = command_settings()
    cutoff = datetime.now(timezone.utc) - timedelta(days=_retention_days(settings, older_than_days))

    async def main() -> PurgeSummary:
        async with runtime(settings, with_worker=False) as rt:
            return await build_erasure(rt.client, settings, rt.backend).purge(cutoff, actor)

    console.print(purge_report(_run(main)) + f" (closed before {cutoff:%Y-%m-%d %H:%M} UTC)",
                  highlight=False)


def retention_schedule(settings: Settings, retention_days: float, every: timedelta) -> Schedule:
    """The Schedule: start ``RetentionWorkflow(retention_days)`` on the task queue every
    ``every``; a run still going when the next is due makes that one skip."""
    action = ScheduleActionStartWorkflow(RetentionWorkflow.run, RetentionInput(retention_days=retention_days),
                                         id="retention-purge", task_queue=settings.task_queue)
    return Schedule(action=action, spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
                    policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP))


async def ensure_schedule(client: Client, schedule: Schedule) -> bool:
    """Create the Schedule ``SCHEDULE_ID``, or update it to ``schedule``; True if created."""
    try:
        await client.create_schedule(SCHEDULE_ID, schedule)
        return True
    except ScheduleAlreadyRunningError:
        await client.get_schedule_handle(SCHEDULE_ID).update(lambda _: ScheduleUpdate(schedule=schedule))
        return False


@retention_app.command()
def schedule(every_hours: float = typer.Option(24.0, "--every-hours", min=0.1, max=24 * MAX_DAYS, help="How often the purge runs."),
             delete: bool = typer.Option(False, "--delete", help="Remove the schedule instead.")) -> None:
    """Create or update the Temporal Schedule that runs the retention purge (a worker runs it)."""
    settings = command_settings()
    days = None if delete else _retention_days(settings, None, option=False)  # refused before connecting

    async def main() -> str:
        try:
            client = await connect(settings)
        except RuntimeError as err:  # TemporalUnreachable: its message names the address and the fix
            raise _fail(str(err), 2)
        if days is None:
            try:
                await client.get_schedule_handle(SCHEDULE_ID).delete()
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND:
                    raise
                return f"no schedule {SCHEDULE_ID} to delete"
            return f"schedule {SCHEDULE_ID} deleted"
        created = await ensure_schedule(client, retention_schedule(settings, days, timedelta(hours=every_hours)))
        return (f"schedule {SCHEDULE_ID} {'created' if created else 'updated'}: every {every_hours:g} h, purge closed "
                f"conversations older than {days:g} day(s), on task queue '{settings.task_queue}'")

    console.print(_run(main), highlight=False)
