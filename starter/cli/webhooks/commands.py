"""``statekeeper webhooks``: create, list and delete a tenant's webhooks, list a webhook's
deliveries and retry one (``starter.client.webhooks.service``; docs/webhooks.md); ``listen``
runs a local receiver (``starter.dev.receiver``) in the foreground or, with ``--detach``, in the
background beside ``statekeeper dev`` (``starter.dev.listener``).

They work on the journal database directly (``Settings.resolved_journal_url()``; a detached
``statekeeper dev``'s data directory when one runs); ``retry`` also starts the delivery's
workflow on Temporal. A new webhook's secret is printed once, on standard output alone (so a
script can capture it). Changes are audited with the actor ``cli``. Exit status 0; 1 when the
database or Temporal cannot be used or the webhook does not exist; 2 for a refused input.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any, Callable, Coroutine, List, Optional, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from activities.store.audit import AuditLog
from activities.store.webhooks import DeliveryStatus
from settings import Settings
from starter.api.journal import printable
from starter.cli.refusals import command_settings, fail, storage_refusals
from starter.client.errors import ConversationError

T = TypeVar("T")
webhooks_app = typer.Typer(help="Webhooks: signed deliveries of a tenant's events to a URL (docs/webhooks.md).",
                           no_args_is_help=True)
console = Console(stderr=True)
CLI_ACTOR = "cli"
TENANT_HELP = "The tenant (default: STATEKEEPER_DEFAULT_TENANT)."


def _run(call: Callable[[Any, Settings], Coroutine[Any, Any, T]], temporal: bool = False) -> T:
    """Run ``call(webhooks, settings)`` on the command's settings; a refusal ends the command
    with one line (status 2 for a refused input, else 1)."""
    from starter.client.webhooks.service import Webhooks
    from starter.runtime.webhooks import allowance, delivery_starter, webhook_store

    settings = command_settings()

    async def main() -> T:
        store = webhook_store(settings)
        starter = None
        if temporal:
            from starter.runtime.connection import connect

            starter = delivery_starter(await connect(settings), settings, store)
        try:
            return await call(Webhooks(store, starter, allowance(settings), settings.default_tenant), settings)
        finally:
            store.close()

    with storage_refusals(settings):
        try:
            return asyncio.run(main())
        except ConversationError as err:
            raise fail(str(err), 2 if err.kind == "invalid" else 1) from None
        except RuntimeError as err:  # StartupRefused, TemporalUnreachable: their message is for people
            raise fail(str(err), 1) from None


def _audit(settings: Settings, action: str, subject: str, detail: str = "") -> None:
    audit = AuditLog(settings.resolved_journal_url())
    try:
        audit.record(CLI_ACTOR, action, subject, detail)
    finally:
        audit.close()


@webhooks_app.command()
def create(url: str = typer.Option(..., "--url", help="Where to POST the events: http(s), at most 2048 characters."),
           events: List[str] = typer.Option(..., "--event", help="An event type to send (repeat it), or '*' for all."),
           description: str = typer.Option("", "--description", help="A note for people."),
           tenant: Optional[str] = typer.Option(None, "--tenant", help=TENANT_HELP)) -> None:
    """Create a webhook and print its signing secret once (standard output)."""
    async def call(hooks, settings):  # noqa: ANN001, ANN202
        made = await hooks.create(url, events, description, tenant=tenant)
        _audit(settings, "create_webhook", made.webhook_id, f"tenant={made.tenant} events={len(made.events)}")
        return made

    made = _run(call)
    console.print(f"created webhook {made.webhook_id} (tenant {made.tenant}) for {escape(made.url)}: "
                  f"{', '.join(made.events)}. Its signing secret is shown once; keep it secret:", highlight=False)
    print(made.secret)


@webhooks_app.command("list")
def list_webhooks(tenant: Optional[str] = typer.Option(None, "--tenant", help=TENANT_HELP),
                  json_out: bool = typer.Option(False, "--json", help="Print them as a JSON list.")) -> None:
    """List the tenant's webhooks (never their secrets)."""
    async def call(hooks, _settings):  # noqa: ANN001, ANN202
        return await hooks.list(tenant=tenant)

    items = _run(call)
    if json_out:
        print(json.dumps([w.model_dump(mode="json") for w in items], indent=2))
        return
    table = Table(title=f"webhooks ({len(items)})")
    table.add_column("webhook id", no_wrap=True, min_width=27)
    for col in ("url", "events", "description", "created (UTC)"):
        table.add_column(col, overflow="fold")
    for w in items:
        table.add_row(w.webhook_id, escape(printable(w.url)), ", ".join(w.events), escape(printable(w.description)),
                      f"{w.created_at:%Y-%m-%d %H:%M:%S}")
    Console().print(table)


@webhooks_app.command()
def delete(webhook_id: str = typer.Argument(..., help="The webhook id (from `statekeeper webhooks list`)."),
           tenant: Optional[str] = typer.Option(None, "--tenant", help=TENANT_HELP)) -> None:
    """Delete a webhook and its deliveries: nothing more is sent to it."""
    async def call(hooks, settings):  # noqa: ANN001, ANN202
        await hooks.delete(webhook_id, tenant=tenant)
        _audit(settings, "delete_webhook", webhook_id)

    _run(call)
    console.print(f"deleted webhook {escape(webhook_id)}", highlight=False)


@webhooks_app.command()
def deliveries(webhook_id: str = typer.Argument(..., help="The webhook id."),
               status: Optional[DeliveryStatus] = typer.Option(None, "--status", help="Only this status."),
               limit: int = typer.Option(100, "--limit", min=1, max=1000, help="At most this many, newest first."),
               tenant: Optional[str] = typer.Option(None, "--tenant", help=TENANT_HELP),
               json_out: bool = typer.Option(False, "--json", help="Print them as a JSON list.")) -> None:
    """List a webhook's deliveries: event, status, attempts, the receiver's last answer."""
    async def call(hooks, _settings):  # noqa: ANN001, ANN202
        return await hooks.deliveries(webhook_id, tenant=tenant, status=status, limit=limit)

    items = _run(call)
    if json_out:
        print(json.dumps([d.model_dump(mode="json") for d in items], indent=2))
        return
    table = Table(title=f"deliveries of {webhook_id} ({len(items)})")
    table.add_column("delivery id (event)", no_wrap=True, min_width=28)
    for col in ("type", "conversation", "seq", "status", "attempts", "last answer", "last attempt (UTC)"):
        table.add_column(col, overflow="fold")
    for d in items:
        answer = str(d.last_status_code) if d.last_status_code else "-"
        if d.last_error:
            answer += f" ({d.last_error})"
        table.add_row(d.delivery_id, d.event_type, escape(printable(d.conversation_id)), str(d.sequence),
                      d.status.value, str(d.attempts), escape(printable(answer)),
                      f"{d.last_attempt_at:%Y-%m-%d %H:%M:%S}" if d.last_attempt_at else "-")
    Console().print(table)


@webhooks_app.command()
def retry(webhook_id: str = typer.Argument(..., help="The webhook id."),
          delivery_id: str = typer.Argument(..., help="The delivery id (its event's id, from `deliveries`)."),
          tenant: Optional[str] = typer.Option(None, "--tenant", help=TENANT_HELP)) -> None:
    """Send a delivery again now (same webhook-id), on a fresh retry schedule."""
    async def call(hooks, settings):  # noqa: ANN001, ANN202
        _audit(settings, "retry_webhook_delivery", webhook_id, f"delivery={delivery_id}")
        return await hooks.retry(webhook_id, delivery_id, tenant=tenant)

    _run(call, temporal=True)
    console.print(f"delivery {escape(delivery_id)} of {escape(webhook_id)} is being sent again", highlight=False)


@webhooks_app.command()
def listen(port: int = typer.Option(8765, "--port", min=0, max=65535,
                                    help="The loopback port to listen on (0: any free one)."),
           secret: Optional[str] = typer.Option(None, "--secret", envvar="STATEKEEPER_WEBHOOK_SECRET",
                                                help="The webhook's signing secret (whsec_...)."),
           secret_file: Optional[Path] = typer.Option(None, "--secret-file", exists=True, dir_okay=False,
                                                      help="A file holding the signing secret."),
           register: bool = typer.Option(False, "--register",
                                         help="Create a webhook for every event type pointing here (its secret "
                                              "used, never printed) and delete it when the listener stops."),
           tenant: Optional[str] = typer.Option(None, "--tenant", help=TENANT_HELP),
           detach: bool = typer.Option(False, "--detach",
                                       help="Run in the background with --register (for `make demo`); its counts "
                                            "go to <data dir>/webhook-listener.json; `statekeeper stop` stops it."),
           record: bool = typer.Option(False, "--record", hidden=True,
                                       help="Keep the record in the data directory (what --detach runs).")) -> None:
    """Receive webhooks on 127.0.0.1: verify each signature, print each event once (deduplicated by webhook-id)."""
    from starter.dev import receiver as rx

    settings = command_settings()
    if detach:
        from starter.dev.listener import log_path, start_listener
        from starter.dev.server import DevServerError

        try:
            running = start_listener(settings, port=port, tenant=tenant)
        except DevServerError as err:
            raise fail(str(err), 1) from None
        console.print(f"webhook listener running in the background (pid {running.pid}) at {running.url}, "
                      f"webhook {running.webhook_id}; events in {log_path(settings)}; "
                      "stop it with `statekeeper stop`.", highlight=False)
        return
    if register == bool(secret or secret_file):
        raise fail("give the webhook's secret (--secret, --secret-file or STATEKEEPER_WEBHOOK_SECRET) "
                   "or --register, not both", 2)
    if secret_file is not None:
        secret = secret_file.read_text().strip()
    path = rx.record_path(settings.data_dir)
    state: dict[str, Any] = {"written": -1}
    writing = threading.Lock()

    def on_event(event: dict) -> None:
        print(rx.event_line(event), flush=True)

    def on_change(counts: rx.Counts) -> None:
        if not record or "record" not in state:
            return
        with writing:  # requests finish on threads in any order: a later snapshot is never overwritten
            seen = counts.received + counts.bad_signature
            if seen > state["written"]:
                rx.write_record(path, state["record"].model_copy(update={"counts": counts}))
                state["written"] = seen

    try:
        # bound first: the webhook's URL needs the port actually taken
        server = rx.serve(None, port)
    except OSError as err:
        raise fail(f"cannot listen on 127.0.0.1:{port}: {err.strerror or err}", 1) from None
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    webhook_id = None
    try:
        if register:
            async def call(hooks, settings):  # noqa: ANN001, ANN202
                made = await hooks.create(url, ["*"], "statekeeper webhooks listen", tenant=tenant)
                _audit(settings, "create_webhook", made.webhook_id, f"tenant={made.tenant} events=1")
                return made

            made = _run(call)
            webhook_id, secret, tenant = made.webhook_id, made.secret, made.tenant
        try:
            receiver = rx.Receiver(secret or "", on_event, on_change)
        except Exception:  # standardwebhooks: not base64 (a secret that is not a whsec_ one)
            raise fail("the secret is not a webhook signing secret (whsec_...)", 2) from None
        server.receiver = receiver
        state["record"] = rx.ListenerRecord(pid=os.getpid(), url=url, webhook_id=webhook_id, tenant=tenant,
                                            started_at=rx.now())
        if record:
            rx.write_record(path, state["record"])
        console.print(f"listening on {url}" + (f" for webhook {webhook_id}" if webhook_id else "")
                      + "; Ctrl-C to stop.", highlight=False)
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        if webhook_id is not None:
            async def drop(hooks, settings):  # noqa: ANN001, ANN202
                await hooks.delete(webhook_id, tenant=tenant)
                _audit(settings, "delete_webhook", webhook_id)

            try:
                _run(drop)
            except (typer.Exit, Exception):  # stopping anyway: the webhook stays, `webhooks delete` removes it
                pass
        if record:
            current = rx.read_record(path)
            if current is None or current.pid == os.getpid():
                path.unlink(missing_ok=True)
