"""The long-running commands (``statekeeper api``, ``codec-server``, ``worker``) as an operator
starts them on day one, with a database that cannot be reached (a wrong host, port or password
in ``STATEKEEPER_JOURNAL_URL`` / ``STATEKEEPER_DATABASE_URL``, PostgreSQL not up yet): each
refuses in one line naming the database and what to check, with status 2. Before, the API and
the codec server printed a page of SQLAlchemy traceback ending ``OperationalError: connection
failed``, and so did the worker for its system of record. No Temporal server runs: the API and
the codec server do not need one to start, and the worker's connection is stubbed."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from starter.runtime import worker as worker_module
from settings import Settings
from starter.runtime.preflight import StartupRefused

BIN = Path(sys.executable).parent
UNREACHABLE = "postgresql+psycopg://statekeeper@127.0.0.1:1/nowhere"  # port 1: refused at once
CLASS_NAMES = ("Traceback", "Error:", "Error)", "Exception", "sqlalche.me")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "STATEKEEPER_DATA_DIR": str(tmp_path), "STATEKEEPER_TEMPORAL_ADDRESS": "127.0.0.1:1",
            "STATEKEEPER_DEV_STATE_FILE": str(tmp_path / "dev.json"), "NO_COLOR": "1", "COLUMNS": "250", **extra}


@pytest.mark.parametrize("command", [["api", "--port", "1"], ["codec-server", "--port", "1"],
                                     ["api", "--host", "0.0.0.0", "--port", "1"]])
def test_a_server_refuses_an_unreachable_journal_in_one_line(tmp_path, command):
    # port 1 is never listened on: the refusal must come before any bind
    # no COLUMNS: a container's log is a pipe, which rich took for 80 columns and wrapped at
    env = _env(tmp_path, STATEKEEPER_JOURNAL_URL=UNREACHABLE)
    env.pop("COLUMNS")
    done = subprocess.run([str(BIN / "statekeeper"), *command], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, (done.stdout, done.stderr)
    said = done.stderr.strip()
    assert not any(name in said for name in CLASS_NAMES), said
    assert said == ("statekeeper: the journal database (API keys, audit log) cannot be reached or refused the "
                    "connection: check the URL, the server and its credentials"), said


def _no_temporal(monkeypatch) -> None:
    """The worker's Temporal connection and preflight stubbed: only its database is tried."""
    async def connect(settings):
        return object()

    async def preflight(client, settings):
        return None

    monkeypatch.setattr(worker_module, "connect", connect)
    monkeypatch.setattr(worker_module, "preflight", preflight)


def test_a_worker_refuses_an_unreachable_system_of_record(tmp_path, monkeypatch):
    _no_temporal(monkeypatch)
    settings = Settings(data_dir=tmp_path, database_url=UNREACHABLE, codec_enabled=False)
    with pytest.raises(StartupRefused) as refused:
        asyncio.run(worker_module.run_worker(settings))
    assert str(refused.value) == ("the system of record (STATEKEEPER_DATABASE_URL) cannot be reached or refused the "
                                  "connection: check the URL, the server and its credentials")


def test_a_worker_names_the_default_sqlite_system_of_record(tmp_path, monkeypatch):
    _no_temporal(monkeypatch)
    (tmp_path / "statekeeper.sqlite").write_bytes(b"not a database, " * 64)
    with pytest.raises(StartupRefused) as refused:
        asyncio.run(worker_module.run_worker(Settings(data_dir=tmp_path, codec_enabled=False)))
    said = str(refused.value)
    assert said.startswith(f"the system of record {tmp_path / 'statekeeper.sqlite'} is not a database"), said
    assert "journal" not in said, said
