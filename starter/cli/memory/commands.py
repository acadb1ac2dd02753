"""``statekeeper memory``: what is remembered about a customer (``starter.client.memory.reads``), read
and corrected from the command line on statekeeper's own database, as the HTTP API's
``/customers/{customer_id}/memory`` does. Changes are in the audit log (actor ``cli``)."""

from __future__ import annotations

import contextlib
import json
from datetime import datetime, timezone
from typing import Iterator

import typer
from rich.console import Console
from rich.markup import escape

from activities.store.audit import AuditLog
from starter.cli.refusals import command_settings, fail, given_id, storage_refusals
from starter.client.errors import ConversationError
from starter.client.memory.reads import CustomerMemory

memory_app = typer.Typer(help="What is remembered about a customer across conversations: show it, forget a fact.",
                         no_args_is_help=True)
console = Console()

CLI_ACTOR = "cli"
TENANT_HELP = "The tenant whose memory of the customer to use."


@contextlib.contextmanager
def _opened() -> Iterator[tuple[CustomerMemory, AuditLog]]:
    settings = command_settings()
    with storage_refusals(settings):
        memory = CustomerMemory(settings.resolved_journal_url(), settings.pseudonym_secret(create=False))
        audit = AuditLog(settings.resolved_journal_url())
        try:
            yield memory, audit
        except ConversationError as err:
            raise fail(str(err), 2 if err.kind == "invalid" else 1) from None
        finally:
            memory.close()
            audit.close()


def _age(when: datetime) -> str:
    days = (datetime.now(timezone.utc) - when).days
    return "today" if days < 1 else f"{days} day(s) ago"


@memory_app.command("show")
def show(customer_id: str = typer.Argument(..., help="The customer id (as the lists take it)."),
         tenant: str = typer.Option("default", "--tenant", help=TENANT_HELP),
         as_json: bool = typer.Option(False, "--json", help="JSON, as GET /customers/{id}/memory answers.")) -> None:
    """Print every fact remembered about the customer, with where and when it was learnt."""
    given_id(customer_id, "customer id")
    with _opened() as (memory, audit):
        page = memory.facts(tenant, customer_id)
        audit.record(CLI_ACTOR, "read_memory", memory.pseudonym(customer_id), f"tenant={tenant} items={len(page.items)}")
    if as_json:
        print(json.dumps(page.model_dump(mode="json"), indent=2, ensure_ascii=False))
        return
    if not page.items:
        console.print("nothing is remembered about this customer.")
        return
    for fact in page.items:  # a block per fact: readable at any terminal width
        value = fact.value + (f" (order {fact.order_id})" if fact.order_id else "")
        console.print(f"[bold]{fact.kind.value}[/]: {escape(value)}", highlight=False, soft_wrap=True)
        console.print(f"  learnt {_age(fact.learnt_at)} in conversation {escape(fact.source.conversation_id)}, "
                      f"turn {fact.source.turn}: \"{escape(fact.source.words)}\"; expires {fact.expires_at:%Y-%m-%d}",
                      highlight=False, soft_wrap=True)
        console.print(f"  id {fact.fact_id}", highlight=False, soft_wrap=True)


@memory_app.command("forget")
def forget(customer_id: str = typer.Argument(..., help="The customer id (as the lists take it)."),
           fact_id: str = typer.Argument(..., help="The fact id `statekeeper memory show` prints."),
           tenant: str = typer.Option("default", "--tenant", help=TENANT_HELP)) -> None:
    """Forget one remembered fact of the customer."""
    given_id(customer_id, "customer id")
    given_id(fact_id, "fact id")
    with _opened() as (memory, audit):
        memory.forget(tenant, customer_id, fact_id)
        audit.record(CLI_ACTOR, "forget_memory", memory.pseudonym(customer_id), f"tenant={tenant} fact={fact_id}")
    console.print("forgotten.")
