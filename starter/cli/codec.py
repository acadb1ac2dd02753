"""``statekeeper codec-server``: the codec server (``starter.api.codec_server``) on its own, for a
Web UI that decodes statekeeper's encrypted payloads with the configured codec keys."""

from __future__ import annotations

import logging
from typing import Optional

import typer

from starter.api.codec_server import codec_app, codec_or_refuse, cors_origins, log, served, served_access
from starter.cli.support import interruptible
from starter.cli.refusals import command_settings
from starter.runtime.logs import configure_logging
from starter.runtime.serving import serve_until_stopped


def codec_server(host: str = typer.Option("127.0.0.1", help="Interface to listen on (other than loopback: API keys required)."),
                 port: Optional[int] = typer.Option(None, min=1, max=65535,
                                                     help="TCP port (default STATEKEEPER_CODEC_PORT).")) -> None:
    """Serve the codec server (POST /encode, /decode) for a Web UI with the configured codec keys."""
    configure_logging(logging.INFO)
    with interruptible():
        settings = command_settings()
        port = settings.codec_port if port is None else port
        codec = codec_or_refuse(settings)
        access = served_access(settings, host)
        app = codec_app(codec, cors_origins(settings), access)
        serve_until_stopped(served(app, host, port), "codec server", lambda: log.info(
            "codec server on http://%s:%s for %s; %s", host, port, ", ".join(cors_origins(settings)),
            "keyless: loopback callers only" if access.keyless else "operator API keys required"))
