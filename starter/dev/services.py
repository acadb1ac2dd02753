"""The external payments, email and ticketing services of ``statekeeper dev``: served in
this process (each on its own port and SQLite file in the data directory) unless their URLs
are configured, in which case those are used."""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator

from settings import Settings
from systems.fleet import SERVICES, Fleet, sqlite_databases


@contextlib.asynccontextmanager
async def external_systems(settings: Settings) -> AsyncIterator[tuple[Settings, str]]:
    """Yields (``settings`` with the services' URLs, a line describing them for the user).
    Serves them on ``settings.services_port`` and the next two ports when no URL is set; a
    port that is taken leaves that part unserved (no payments mirror, the retail side
    channels) and says so."""
    if settings.payments_url or settings.email_url or settings.ticketing_url:
        yield settings, "external services at their configured URLs"
        return
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    ports = {name: settings.services_port + i for i, name in enumerate(SERVICES)}
    fleet = Fleet(sqlite_databases(settings.data_dir), ports)
    try:
        urls = await asyncio.to_thread(fleet.start)
    except OSError as err:
        yield settings, f"external services not served ({err}; set STATEKEEPER_SERVICES_PORT)"
        return
    try:
        served = settings.model_copy(update={f"{name}_url": url for name, url in urls.items()})
        yield served, "payments " + urls["payments"] + ", email " + urls["email"] + ", ticketing " + urls["ticketing"]
    finally:
        await asyncio.to_thread(fleet.stop)
