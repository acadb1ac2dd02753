"""Alembic migrations of statekeeper's own database, the journal's (``Settings.journal_url``):
the tables ``activities.store.schema`` lists (the decision log and transcript, the audit log,
the API keys, the limits per key and tenant, the webhooks with their deliveries, the facts
remembered about customers). The retail store under ``systems/`` is a simulated external system
and keeps its own schema code.

``upgrade(engine)`` brings a database to the newest revision (``statekeeper migrate``, the
compose ``migrate`` job, and every ``JournalStore``/``AuditLog``/``KeyStore`` on first use);
it is idempotent, and several processes may run it at once (on PostgreSQL an advisory lock
serializes them; SQLite's write lock does so itself). Revisions live in ``migrations/versions``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from pathlib import Path
from typing import Iterator, Optional

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection, Engine

log = logging.getLogger("statekeeper.journal")

MIGRATIONS = Path(__file__).resolve().with_name("migrations")
LOCK_NAME = "statekeeper-journal"
"""The PostgreSQL advisory lock (``hashtext`` of this name) held while migrating."""

_done: set[str] = set()
_done_lock = threading.Lock()


def alembic_config(connection: Optional[Connection] = None) -> Config:
    """An Alembic ``Config`` for ``MIGRATIONS``; ``env.py`` runs on ``connection``."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest revision id."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "no migration revisions"
    return head


def current_revision(engine: Engine) -> Optional[str]:
    """The revision ``engine``'s database is at (None: never migrated)."""
    with engine.connect() as conn, _alembic_quiet():
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate ``engine``'s database to ``revision`` (default the newest) in one transaction.
    A database made before migrations existed (tables created directly) is adopted: the first
    revision creates only the tables it lacks. Done at most once per process and URL for
    ``head``. Raises ``sqlalchemy.exc.SQLAlchemyError`` when the database fails."""
    key = engine.url.render_as_string(hide_password=False)
    if revision == "head" and key in _done:
        return
    # one migration at a time in this process: Alembic's ``op`` and ``context`` are module-wide
    # proxies, so threads migrating at once (the first model calls of a worker, each opening
    # the journal) broke each other's runs (KeyError); other processes wait on the database lock
    with _done_lock:
        if revision == "head" and key in _done:
            return
        with engine.begin() as conn, _alembic_quiet():
            if engine.dialect.name == "postgresql":
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(sa.func.hashtext(LOCK_NAME))))
            before = MigrationContext.configure(conn).get_current_revision()
            command.upgrade(alembic_config(conn), revision)
            after = MigrationContext.configure(conn).get_current_revision()
        if after != before:  # one line, where Alembic would log each revision's whole docstring
            log.info("journal schema migrated from %s to %s", before or "nothing", after)
        if revision == "head":
            _done.add(key)


@contextlib.contextmanager
def _alembic_quiet() -> Iterator[None]:
    """Alembic's migration logger at WARNING for the duration (its INFO lines, a revision's
    docstring each, came before anything else a command printed, e.g. the API's refusal)."""
    logger = logging.getLogger("alembic.runtime.migration")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)
