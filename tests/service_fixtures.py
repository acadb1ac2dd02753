"""The external services (payments, email, ticketing) as real HTTP servers for tests: on
SQLite files, or each on a PostgreSQL database of its own (created per run, dropped after)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from systems.fleet import SERVICES, Fleet, sqlite_databases
from tests.journal_fixtures import postgres_database


@contextlib.contextmanager
def running_services(databases: dict[str, str]) -> Iterator[dict[str, str]]:
    """Serve the three services on ``databases``; yields {name: base URL}."""
    fleet = Fleet(databases)
    try:
        yield fleet.start()
    finally:
        fleet.stop()


@contextlib.contextmanager
def postgres_services() -> Iterator[dict[str, str]]:
    """The three services, each on its own fresh PostgreSQL database."""
    with contextlib.ExitStack() as stack:
        databases = {name: stack.enter_context(postgres_database()) for name in SERVICES}
        with running_services(databases) as urls:
            yield urls


@pytest.fixture
def services(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The three services on SQLite files under ``tmp_path``."""
    with running_services(sqlite_databases(tmp_path)) as urls:
        yield urls


@pytest.fixture
def pg_services() -> Iterator[dict[str, str]]:
    """The three services on PostgreSQL, a database each."""
    with postgres_services() as urls:
        yield urls


def arm(url: str, kind: str, count: int = 1, seconds: float | None = None) -> None:
    """Inject fault ``kind`` into the next ``count`` effect requests of the service at ``url``."""
    body = {"kind": kind, "count": count, **({"seconds": seconds} if seconds is not None else {})}
    httpx.post(f"{url}/_faults", json=body).raise_for_status()
