"""``statekeeper keys``: create, list and revoke the HTTP API's keys (``activities.store.api_keys``).

They work on the journal database directly (``Settings.resolved_journal_url()``; a detached
``statekeeper dev``'s data directory when one runs), with the server secret of
``Settings.api_key_hmac_secret`` — the API must run with the same database and secret. No
Temporal server is needed. A new key is printed once, on standard output alone (so a script
can capture it); it is stored only as a digest.
"""

from __future__ import annotations

import contextlib
import re
from typing import Iterator, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from settings import Settings
from activities.store.audit import AuditLog
from starter.cli.refusals import command_settings, storage_refusals
from starter.api.journal import printable
from activities.store.api_keys import MAX_REQUESTS_PER_MINUTE, KeyStore, Role
from workflows.domain.pseudonym import customer_pseudonym

CUSTOMER_ID = re.compile(r"[A-Za-z0-9#._:@-]{1,128}", re.ASCII)
"""A customer id a key may be scoped to (the API's id alphabet, as ``statekeeper erase`` takes it)."""

keys_app = typer.Typer(help="API keys of the HTTP API: one per calling service, bound to a tenant and a role.",
                       no_args_is_help=True)
console = Console(stderr=True)

CLI_ACTOR = "cli"
"""The actor of key changes in the audit log."""


@contextlib.contextmanager
def _opened() -> Iterator[tuple[Settings, KeyStore, AuditLog]]:
    settings = command_settings()
    with storage_refusals(settings):  # a damaged, locked or newer database: one line, not a traceback
        try:
            store = KeyStore(settings.resolved_journal_url(), settings.api_key_hmac_secret() or "")
        except ValueError as err:
            console.print(f"[red]statekeeper: {escape(str(err))} (STATEKEEPER_API_KEY_SECRET is set but empty)[/]")
            raise typer.Exit(2)
        audit = AuditLog(settings.resolved_journal_url())
        try:
            yield settings, store, audit
        finally:
            store.close()
            audit.close()


@keys_app.command()
def create(tenant: str = typer.Option(..., "--tenant", help="The tenant the key acts for (e.g. default)."),
           role: Role = typer.Option(..., "--role", help="service (backends) or operator (approvals, cancels)."),
           customer: Optional[str] = typer.Option(None, "--customer",
                                                  help="Scope a service key to this one customer (real id; "
                                                       "stored as its pseudonym)."),
           label: str = typer.Option("", "--label", help="A note for people: which service holds the key."),
           requests_per_minute: Optional[int] = typer.Option(
               None, "--requests-per-minute", min=1, max=MAX_REQUESTS_PER_MINUTE,
               help="The key's own request rate limit (default: STATEKEEPER_API_REQUESTS_PER_MINUTE).")) -> None:
    """Create a key and print it once (standard output); it is stored only as a digest."""
    if customer is not None and not CUSTOMER_ID.fullmatch(customer):  # e.g. an unset shell variable
        console.print("[red]statekeeper: --customer is not a customer id: 1-128 characters of A-Z a-z 0-9 "
                      "# . _ : @ -[/]", highlight=False)
        raise typer.Exit(2)
    with _opened() as (settings, store, audit):
        pseudonym = None
        if customer is not None:
            # the workers' pseudonym key (made here if none exists yet, in the same data directory)
            pseudonym = customer_pseudonym(customer, settings.pseudonym_secret() or "")
        try:
            record, key = store.create(tenant, role, customer=pseudonym, label=label,
                                       requests_per_minute=requests_per_minute)
        except ValueError as err:
            console.print(f"[red]statekeeper: {escape(str(err))}[/]")
            raise typer.Exit(2)
        audit.record(CLI_ACTOR, "create_api_key", f"key:{record.key_id}",
                     f"tenant={record.tenant} role={record.role.value} scoped={pseudonym is not None} "
                     f"rpm={record.requests_per_minute or 'default'}")
    console.print(f"created key {record.key_id} (tenant {record.tenant}, role {record.role.value}"
                  + (f", customer {pseudonym}" if pseudonym else "") + "). It is shown once; keep it secret:",
                  highlight=False)
    print(key)


@keys_app.command("list")
def list_keys(all_keys: bool = typer.Option(False, "--all", help="Also revoked keys.")) -> None:
    """List the keys (never their secrets): id, tenant, role, customer scope, label, dates."""
    with _opened() as (_, store, _audit):
        records = store.keys(include_revoked=all_keys)
    table = Table(title=f"API keys ({len(records)})")
    # the key id is what `keys revoke` takes: never cut, whatever the terminal's width
    table.add_column("key id", no_wrap=True, min_width=max([len(r.key_id) for r in records] + [6]))
    for col in ("tenant", "role", "customer", "requests/min", "label", "created (UTC)", "revoked (UTC)"):
        table.add_column(col, overflow="fold")
    for r in records:
        # printable: a label stored before labels were checked may hold an escape sequence
        table.add_row(r.key_id, escape(printable(r.tenant)), r.role.value, r.customer or "-",
                      str(r.requests_per_minute or "default"), escape(printable(r.label)),
                      f"{r.created_at:%Y-%m-%d %H:%M:%S}", f"{r.revoked_at:%Y-%m-%d %H:%M:%S}" if r.revoked_at else "-")
    Console().print(table)


@keys_app.command()
def revoke(key_id: str = typer.Argument(..., help="The key id (from `statekeeper keys list`).")) -> None:
    """Revoke a key at once: the API refuses it from its next request on."""
    with _opened() as (_, store, audit):
        if not store.revoke(key_id):
            console.print(f"[red]statekeeper: no active key {escape(key_id)}[/]")
            raise typer.Exit(1)
        audit.record(CLI_ACTOR, "revoke_api_key", f"key:{key_id}")
    console.print(f"revoked key {escape(key_id)}", highlight=False)
