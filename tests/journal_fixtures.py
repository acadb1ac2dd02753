"""Journal databases for tests: a SQLite file, or a PostgreSQL database of the test run's
own (created on the server of ``tests.conftest.POSTGRES_URL``, dropped afterwards)."""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path
from typing import Iterator

import pytest
import sqlalchemy as sa

from tests.conftest import POSTGRES_URL


@contextlib.contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh, empty PostgreSQL database; yields its URL, drops it (and its connections) after."""
    server = sa.make_url(POSTGRES_URL)
    name = f"journal_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        yield server.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def sqlite_url(tmp_path: Path) -> str:
    """A journal SQLite file under ``tmp_path``."""
    return f"sqlite:///{tmp_path / 'journal.sqlite'}"


@pytest.fixture(params=["postgresql", "sqlite"], name="url")
def either_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The fixture ``url``: a fresh database of each kind the journal runs on, one test per kind
    (import ``either_database`` into a test module to use it)."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path)
    else:
        with postgres_database() as made:
            yield made


@pytest.fixture(params=["sqlite", "postgresql"], name="store")
def either_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator["JournalStore"]:
    """The fixture ``store``: a ``JournalStore`` on a fresh database of each kind the journal runs
    on, closed after the test (import ``either_store`` into a test module to use it)."""
    from activities.store.journal import JournalStore  # noqa: PLC0415 (the fixtures module stays light)

    with contextlib.ExitStack() as stack:
        url = sqlite_url(tmp_path) if request.param == "sqlite" else stack.enter_context(postgres_database())
        journal = JournalStore(url)
        yield journal
        journal.close()
