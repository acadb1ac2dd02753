"""statekeeper's own database (the journal's: decision log, transcript, audit log, API keys)
is made by its Alembic migrations (``activities.store.migrate``), on PostgreSQL and SQLite:
the revisions produce exactly the SQLAlchemy metadata the code uses (Alembic's
``compare_metadata`` finds no difference), upgrading again changes nothing, and a database
made before migrations existed is adopted."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from activities.store.migrate import current_revision, head_revision, upgrade
from activities.store.schema import owned_metadata
from activities.store.journal import JournalStore, ModelCallRecord
from activities.store.tables import make_engine, metadata as journal_metadata
from activities.store.audit import AuditLog
from tests.journal_fixtures import either_database, sqlite_url  # noqa: F401 (either_database: the url fixture)

OWNED = {"model_calls", "verdicts", "transcript", "events", "refund_events", "audit_log", "api_keys", "effect_dispatches",
         "api_key_rates", "tenant_conversations", "webhooks", "webhook_deliveries", "memory_facts",
         "memory_writes"}


def schema_diff(engine: sa.Engine) -> list:
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": True})
        return compare_metadata(context, owned_metadata())


def tables(engine: sa.Engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


def columns(engine: sa.Engine) -> dict[str, list[tuple[str, str, bool]]]:
    inspector = sa.inspect(engine)
    return {t: [(c["name"], str(c["type"]), c["nullable"]) for c in inspector.get_columns(t)] for t in sorted(OWNED)}


def test_the_metadata_covers_every_table_statekeeper_owns():
    assert set(owned_metadata().tables) == OWNED


def test_migrations_on_a_fresh_database_give_the_metadata_exactly(url: str):
    engine = make_engine(url)
    try:
        assert tables(engine) == set() and current_revision(engine) is None
        assert schema_diff(engine)  # the check sees a difference when there is one
        upgrade(engine)
        assert tables(engine) == OWNED | {"alembic_version"}
        assert current_revision(engine) == head_revision()
        assert schema_diff(engine) == []
    finally:
        engine.dispose()


def test_upgrading_again_changes_nothing(url: str):
    engine = make_engine(url)
    try:
        upgrade(engine)
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO audit_log (at, actor, action, subject, detail) "
                                 "VALUES (CURRENT_TIMESTAMP, 'test', 'read_state', 'c-1', '')"))
        before = columns(engine)
        upgrade(engine, "head")
        again = make_engine(url)  # another process: its own engine, not this process's memo
        try:
            from activities.store import migrate
            migrate._done.discard(url)
            upgrade(again)
            assert columns(again) == before and current_revision(again) == head_revision()
            assert schema_diff(again) == []
            with again.connect() as conn:
                assert conn.execute(sa.text("SELECT count(*) FROM audit_log")).scalar() == 1
        finally:
            again.dispose()
    finally:
        engine.dispose()


def test_a_database_made_before_migrations_is_adopted(url: str):
    # v0.1 made the journal's tables with metadata.create_all and no alembic_version; the
    # audit log and the keys came later, so such a database holds some tables, not all
    engine = make_engine(url)
    try:
        journal_metadata.create_all(engine)
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO transcript (conversation_id, turn, seq, role, kind, text, at) "
                                 "VALUES ('c-1', 1, 0, 'user', 'message', 'hello', CURRENT_TIMESTAMP)"))
        upgrade(engine)
        assert tables(engine) == OWNED | {"alembic_version"} and schema_diff(engine) == []
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT text FROM transcript")).scalar() == "hello"
    finally:
        engine.dispose()


def test_the_stores_migrate_on_first_use(url: str):
    store = JournalStore(url)
    try:
        assert store.transcript("nobody") == []
        assert current_revision(store.engine) == head_revision()
        AuditLog(url).record("test", "read_state", "c-1")
        assert schema_diff(store.engine) == []
    finally:
        store.close()


def test_a_reader_never_creates_the_schema(tmp_path: Path):
    store = JournalStore(sqlite_url(tmp_path), create=False)
    try:
        with pytest.raises(sa.exc.OperationalError):
            store.transcript("c-1")
        assert tables(store.engine) == set()
    finally:
        store.close()


def test_statekeeper_migrate_command(tmp_path: Path):
    env = {**os.environ, "STATEKEEPER_DATA_DIR": str(tmp_path), "STATEKEEPER_JOURNAL_URL": sqlite_url(tmp_path),
           "STATEKEEPER_DEV_STATE_FILE": str(tmp_path / "dev.json")}
    command = [sys.executable, "-m", "starter.cli.app", "migrate"]
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert f"migrated from empty to revision {head_revision()}" in first.stderr
    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0 and f"already at revision {head_revision()}" in second.stderr
    engine = make_engine(sqlite_url(tmp_path))
    try:
        assert schema_diff(engine) == []
    finally:
        engine.dispose()


def test_statekeeper_migrate_fails_readably_when_the_database_is_unreachable(tmp_path: Path):
    env = {**os.environ, "STATEKEEPER_DATA_DIR": str(tmp_path), "STATEKEEPER_DEV_STATE_FILE": str(tmp_path / "d.json"),
           "STATEKEEPER_JOURNAL_URL": "postgresql+psycopg://nobody:secret-pw@127.0.0.1:1/none"}
    done = subprocess.run([sys.executable, "-m", "starter.cli.app", "migrate"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1
    # worded from the failure's kind, never its class name ("(OperationalError)")
    assert "the journal database (STATEKEEPER_JOURNAL_URL) cannot be reached" in done.stderr
    assert "OperationalError" not in done.stderr
    assert "secret-pw" not in done.stderr + done.stdout and "Traceback" not in done.stderr


def test_calls_recorded_before_prompt_caching_keep_their_rows_with_no_cache_tokens(url: str):
    engine = make_engine(url)
    try:
        upgrade(engine, "0001")  # the journal as v0.1 and the first migrated releases left it
        with engine.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO model_calls (conversation_id, turn, call_seq, prompt_version, model, view, "
                "input_tokens, output_tokens, recorded_at) "
                "VALUES ('c-1', 1, 1, '2026-11-30', 'm', '{}', 900, 30, CURRENT_TIMESTAMP)"))
        from activities.store import migrate
        migrate._done.discard(url)
        upgrade(engine)
        assert current_revision(engine) == head_revision() and schema_diff(engine) == []
        with engine.connect() as conn:
            row = conn.execute(sa.text("SELECT input_tokens, cache_read_input_tokens, cache_creation_input_tokens "
                                       "FROM model_calls")).one()
        assert tuple(row) == (900, 0, 0)
    finally:
        engine.dispose()


def test_threads_opening_a_new_journal_at_once_all_succeed(url: str):
    # a worker's first model calls each open the journal in their own thread; Alembic's
    # module-wide proxies made simultaneous migrations fail each other (KeyError, CI)
    from concurrent.futures import ThreadPoolExecutor

    store = JournalStore(url)
    try:
        records = [ModelCallRecord(conversation_id=f"c-{i}", turn=1, call_seq=1, prompt_version="p", model="m",
                                   view={}, recorded_at=datetime.now(timezone.utc)) for i in range(12)]
        with ThreadPoolExecutor(12) as pool:
            list(pool.map(store.record_model_call, records))
        assert {r.conversation_id for r in store.decisions()} == {f"c-{i}" for i in range(12)}
        assert current_revision(store.engine) == head_revision()
    finally:
        store.close()


def test_a_migration_logs_one_line_not_alembics_revision_docstrings(tmp_path, caplog):
    engine = make_engine(f"sqlite:///{tmp_path / 'quiet.sqlite'}")
    with caplog.at_level(logging.INFO):
        upgrade(engine)
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert len(said) == 1 and said[0].startswith("journal schema migrated from nothing to "), said
