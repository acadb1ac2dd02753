"""``statekeeper dev`` and ``statekeeper stop``: the embedded Temporal dev server with a worker,
the HTTP API, the codec server and the external services, in the foreground or detached."""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Optional

import typer

from starter.dev import state as devstate
from starter.api.server import api_beside
from starter.api.auth import access_from_settings
from starter.api.codec_server import codec_for_dev
from starter.cli.migrate import migrate_for_dev
from starter.dev.stack import runtime
from starter.runtime.stop_signals import run_until_stopped


def dev(detach: bool = typer.Option(False, "--detach", help="Run in the background; stop with `statekeeper stop`."),
        record_state: bool = typer.Option(False, "--record-state", hidden=True,
                                          help="Record this process in the dev state file once its worker polls "
                                               "(what --detach runs in the background).")) -> None:
    """Run the embedded Temporal dev server (SQLite, Web UI) and a worker until Ctrl-C."""
    from starter.cli.support import interruptible, console
    from starter.cli.refusals import command_settings
    from starter.cli.support import ui_url

    settings = command_settings()
    if "webhook_allow_loopback" not in settings.model_fields_set:
        # a receiver on this machine (`statekeeper webhooks listen`, a test server) is the dev case
        settings = settings.model_copy(update={"webhook_allow_loopback": True})
    if detach:
        from starter.dev.background import log_path, start_detached

        with interruptible(130):
            access = access_from_settings(settings, settings.api_host)  # refused here, not in the background
            running = start_detached(settings)
        api_url = f"{running.api_url} ({access.describe()})" if running.api_url else "not served (port taken; see the log)"
        # said here too: only the log said it, and refunds then skip the payments mirror
        services = "" if running.payments_url or running.email_url or running.ticketing_url else (
            "external services (payments, email, ticketing) not served (port taken: set STATEKEEPER_SERVICES_PORT; "
            "see the log); ")
        ui = ui_url(settings) if running.started_server else (
            f"that server's (this dev uses the Temporal server already running at {running.temporal_address}, "
            "which it did not start)")
        console.print(f"[green]statekeeper dev[/] running in the background (pid {running.pid}); "
                      f"Web UI {ui}; HTTP API {api_url}; {services}"
                      f"data in {running.data_dir}; logs in {log_path(settings)}; "
                      "stop it with `statekeeper stop` (from any directory).")
        return

    async def main() -> None:
        from starter.dev.services import external_systems

        await migrate_for_dev(settings)  # statekeeper's own schema (Alembic), first
        async with external_systems(settings) as (served_settings, services_line), \
                runtime(served_settings, create_key=True) as rt, contextlib.AsyncExitStack() as stack:
            where = "started embedded server" if rt.started_server else "using the server already running"
            served: Optional[str] = None
            access = await asyncio.to_thread(access_from_settings, settings, settings.api_host)
            try:
                # the services' URLs too: the API checks an operator's resolution against the payments
                # service (without them "applied" was taken for a refund whose money never moved)
                api_url = served = await stack.enter_async_context(api_beside(rt.client, served_settings,
                                                                              access=access))
            except OSError as err:  # e.g. the port is taken: the worker and the Web UI still serve
                api_url = f"not served ({err}; set STATEKEEPER_API_PORT)"
            else:
                api_url += f" ({access.describe()})"
            codec_url = await codec_for_dev(stack, settings)
            console.print(f"[green]statekeeper dev[/]: {where} at {settings.temporal_address}; "
                          f"Web UI {ui_url(settings)}; HTTP API {api_url}; codec server {codec_url}; worker on task queue "
                          f"'{settings.task_queue}'{' (offline stand-in model)' if settings.offline else ''}; "
                          f"data in {settings.data_dir}; {services_line}. "
                          + ("Stop it with `statekeeper stop`." if record_state else "Ctrl-C to stop."))
            # a foreground dev is recorded too (for a chat beside it), unless another live one is
            recorded = record_state or devstate.read(settings) is None
            if recorded:
                devstate.write(settings, devstate.describe(served_settings, os.getpid(), api_url=served,
                                                           detached=record_state, started_server=rt.started_server))
            try:
                # until stopped (run_until_stopped), or until the server it started is gone: the
                # worker would retry its polls for ever, logging each failure
                await (_embedded_server_gone(settings) if rt.started_server else asyncio.Event().wait())
            finally:
                if recorded:
                    devstate.remove(settings, os.getpid())

    with interruptible():
        run_until_stopped(main)


async def _embedded_server_gone(settings, checks: int = 3, interval_seconds: float = 1.0) -> None:
    """Return never while the embedded Temporal server answers; raise ``DevServerError`` once it
    has refused connections ``checks`` times in a row, ``interval_seconds`` apart (a crash, an
    operator's kill, the OOM killer)."""
    from starter.dev.server import DevServerError, reachable

    refused = 0
    while refused < checks:
        await asyncio.sleep(interval_seconds)
        refused = 0 if await asyncio.to_thread(reachable, settings.temporal_address) else refused + 1
    raise DevServerError(f"the embedded Temporal server at {settings.temporal_address} stopped (its log: "
                         f"{settings.data_dir / 'temporal-server.log'}); statekeeper dev stops too")


def stop() -> None:
    """Stop the running `statekeeper dev` (detached, or in another terminal) recorded in the dev state file (from any directory), and its webhook listener."""
    from starter.dev.background import stop_detached
    from starter.cli.support import console
    from starter.cli.refusals import command_settings
    from starter.dev.server_owner import stop_orphan

    from starter.dev.listener import stop_listener

    settings = command_settings()
    listener = stop_listener(settings)  # first: it deletes its webhook in the dev's database
    stopped = stop_detached(settings)
    # a dev killed outright (SIGKILL) left its embedded server: stopped too, whatever the record says
    orphaned = stop_orphan(settings.data_dir, settings.temporal_address)
    if listener:
        console.print("stopped the webhook listener (its webhook deleted).")
    if stopped:
        console.print("stopped.")
    elif orphaned:
        console.print("stopped the embedded Temporal server a killed `statekeeper dev` left running.")
    else:
        console.print("no background `statekeeper dev` is running.")
