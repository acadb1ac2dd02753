"""Bring up what a CLI command needs: a Temporal server (embedded when none is
reachable), a connected client and, unless told otherwise, an in-process worker."""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator, NamedTuple

from temporalio.client import Client

from settings import Settings
from starter.runtime.codec import check_configured_keys
from starter.runtime.connection import TemporalUnreachable, connect
from starter.dev.server import embedded_temporal
from starter.runtime.preflight import StartupRefused
from systems.retail.backend import RetailBackend
from starter.runtime.worker import build_backend, build_worker, preflight


class Runtime(NamedTuple):
    """What a CLI command runs against: the client, the backend, and whether this
    process started the embedded server."""

    client: Client
    backend: RetailBackend
    started_server: bool


async def connect_with_retry(settings: Settings, attempts: int = 50, *, create_key: bool = False) -> Client:
    """Connect to Temporal, retrying while a just-started server finishes booting
    (``create_key``: see ``starter.runtime.connection.connect``)."""
    for attempt in range(attempts):
        try:
            return await connect(settings, create_key=create_key)
        except RuntimeError as err:
            # waiting helps while a just-started server boots, not after a refusal (e.g. no codec key)
            refused = isinstance(err, StartupRefused) and not isinstance(err, TemporalUnreachable)
            if refused or attempt == attempts - 1:
                raise
            await asyncio.sleep(0.3)
    raise AssertionError("unreachable")


@contextlib.asynccontextmanager
async def runtime(settings: Settings, *, with_worker: bool = True, create_key: bool = False) -> AsyncIterator[Runtime]:
    """Server + client + backend (+ a worker running in this process).

    The payload codec's key is created in the data directory when none is configured if
    ``create_key`` (``statekeeper dev``) or this call started the embedded server (a local
    run); otherwise a missing key raises ``starter.runtime.codec.CodecKeyMissing``.

    Before using the server it runs ``worker.preflight``: missing search attributes are
    registered, and ``StartupRefused`` is raised (nothing started here keeps running) when an
    attribute has the wrong type or, with a worker, when the task queue is served by another
    system of record. Unusable codec keys (``starter.runtime.codec.CodecKeySettingInvalid``) are refused
    before anything starts."""
    check_configured_keys(settings)  # not after starting an embedded server only to stop it
    async with embedded_temporal(settings) as started:
        client = await connect_with_retry(settings, create_key=create_key or started)
        try:
            await preflight(client, settings, serving=with_worker)
        except StartupRefused as err:
            if started:
                raise
            raise StartupRefused(f"{err} {already_running(settings)}") from err
        backend = await asyncio.to_thread(build_backend, settings)
        if not with_worker:
            yield Runtime(client, backend, started)
            return
        from starter.runtime.webhooks import ensure_sweeper

        async with build_worker(client, settings, backend):
            await ensure_sweeper(client, settings)
            yield Runtime(client, backend, started)


def already_running(settings: Settings) -> str:
    """What a refusal adds when the server at the configured address was not started by this
    command: on a shared machine it may be another user's dev, and the way out is a server of
    one's own on other ports, which the refusal alone did not say."""
    return (f"The Temporal server at {settings.temporal_address} was already running (this command did not start "
            "it); if it is someone else's, run your own beside it on free ports: STATEKEEPER_TEMPORAL_ADDRESS, "
            "STATEKEEPER_UI_PORT, and for `dev` also STATEKEEPER_API_PORT, "
            "STATEKEEPER_CODEC_PORT, STATEKEEPER_SERVICES_PORT and STATEKEEPER_DEV_STATE_FILE.")
