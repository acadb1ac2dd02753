"""Serving the HTTP API (``starter.api.application``) with uvicorn: on its own (``statekeeper api``)
or beside the worker of ``statekeeper dev``, in the same event loop and over the same
Temporal client. Both decide its authentication before listening (``starter.api.auth``): API keys
when any exists; keyless on a loopback host while none does; any other host without keys
is refused (``StartupRefused``)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator, Optional

import uvicorn
from temporalio.client import Client

from activities.store.journal import JournalStore
from settings import Settings
from starter.api.application import create_app
from starter.api.auth import Access, access_from_settings
from starter.api.inbox.pages import WebUiLinks
from starter.client.conversations import StatekeeperClient
from starter.ops.bootstrap import client_for
from starter.runtime.connection import connect, data_converter
from starter.runtime.serving import serve_until_stopped, serving


def serve(settings: Settings, host: str, port: int, announce=print) -> None:  # noqa: ANN001 (a print-like)
    """Run the API for ``settings`` until interrupted (then, after a graceful shutdown,
    ``KeyboardInterrupt``); it connects to Temporal when it starts serving (and retries on
    demand while Temporal is unreachable). Raises ``StartupRefused`` before listening on a
    non-loopback ``host`` without API keys, and (``starter.runtime.codec.CodecKeyMissing``) when
    encryption is on and has no key; ``starter.runtime.serving.NotListening`` when it cannot listen
    (e.g. the port is taken). ``announce`` gets one line saying where it listens and how callers
    authenticate, once it listens."""
    data_converter(settings)  # refuse to start without a codec key, not on the first request

    async def connected() -> StatekeeperClient:
        return client_for(await connect(settings), settings)

    access = access_from_settings(settings, host)
    app = create_app(connected, lambda: JournalStore(settings.resolved_journal_url()), access,
                     WebUiLinks.from_settings(settings))
    # log_config=None: uvicorn's records go through the root logger and its redaction
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="info", log_config=None))
    app.state.stopping = lambda: server.should_exit  # open event streams end when it stops
    serve_until_stopped(server, "HTTP API",
                        lambda: announce(f"statekeeper api on http://{host}:{port}: {access.describe()}"))


@contextlib.asynccontextmanager
async def api_beside(temporal_client: Client, settings: Settings, host: Optional[str] = None,
                     port: Optional[int] = None, access: Optional[Access] = None) -> AsyncIterator[str]:
    """Serve the API in this event loop over ``temporal_client`` while the block runs;
    yields its base URL. ``access`` None: ``access_from_settings`` for ``host``. Raises
    ``OSError`` if the port is taken, ``StartupRefused`` for a non-loopback host without keys."""
    host = host or settings.api_host
    port = settings.api_port if port is None else port
    access = access or await asyncio.to_thread(access_from_settings, settings, host)
    app = create_app(lambda: client_for(temporal_client, settings),
                     lambda: JournalStore(settings.resolved_journal_url()), access, WebUiLinks.from_settings(settings))
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on",
                                           log_config=None))
    app.state.stopping = lambda: server.should_exit  # open event streams end when it stops
    async with serving(server, "API", host, port) as url:
        yield url
