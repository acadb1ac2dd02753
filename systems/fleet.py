"""The three external services together: ``Fleet(databases).start()`` serves payments, email
and ticketing as real HTTP servers, each on its own database and port. One of them on its
own, as docker-compose.yml's demo profile runs each: ``uvicorn --factory
systems.fleet:app_from_environment`` with ``SYSTEMS_SERVICE`` and ``SYSTEMS_DATABASE_URL``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional

from fastapi import FastAPI

from systems.email.service import create_app as email_app
from systems.payments.service import create_app as payments_app
from systems.service_kit.server import ServiceThread
from systems.ticketing.service import create_app as ticketing_app

SERVICES: dict[str, Callable[[str], FastAPI]] = {
    "payments": payments_app, "email": email_app, "ticketing": ticketing_app,
}


def app_from_environment() -> FastAPI:
    """The app of the service ``SYSTEMS_SERVICE`` names (payments, email or ticketing) on the
    database at ``SYSTEMS_DATABASE_URL`` (SQLite file or PostgreSQL; its tables are created).
    Raises ``ValueError`` naming what is missing or unknown."""
    name = os.environ.get("SYSTEMS_SERVICE", "")
    url = os.environ.get("SYSTEMS_DATABASE_URL", "")
    if name not in SERVICES:
        raise ValueError(f"SYSTEMS_SERVICE must be one of {', '.join(SERVICES)}, not {name!r}")
    if not url.strip():
        raise ValueError("SYSTEMS_DATABASE_URL must name the service's database, e.g. sqlite:////data/payments.sqlite")
    return SERVICES[name](url)


def sqlite_databases(directory: Path) -> dict[str, str]:
    """One SQLite file per service in ``directory`` (``payments.sqlite``, ...)."""
    return {name: f"sqlite:///{directory / f'{name}.sqlite'}" for name in SERVICES}


class Fleet:
    """``Fleet(databases, ports=None)``: ``databases`` maps each service name to its database
    URL; ``ports`` to its TCP port (default: a free one). ``start()`` returns {name: base URL}."""

    def __init__(self, databases: dict[str, str], ports: Optional[dict[str, int]] = None) -> None:
        self.databases = databases
        self.ports = ports or {}
        self.threads: dict[str, ServiceThread] = {}
        self.apps: dict[str, FastAPI] = {}

    def start(self) -> dict[str, str]:
        """Serve every service; raises ``OSError`` when one cannot listen (the others stop)."""
        try:
            for name, create in SERVICES.items():
                self.apps[name] = create(self.databases[name])
                self.threads[name] = ServiceThread(self.apps[name], port=self.ports.get(name)).start()
        except BaseException:
            self.stop()
            raise
        return self.urls

    @property
    def urls(self) -> dict[str, str]:
        return {name: thread.url for name, thread in self.threads.items()}

    def stop(self) -> None:
        for thread in self.threads.values():
            thread.stop()
        for app in self.apps.values():
            app.state.effects.engine.dispose()
        self.threads.clear()
