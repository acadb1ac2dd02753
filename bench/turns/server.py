"""What a ``bench/turns.py`` row runs against: a Temporal dev server with statekeeper's dynamic
config and its metrics endpoint, and a system-of-record database (a PostgreSQL database of its
own, SQLite when PostgreSQL is not reachable).

A row gets its own server and database (``fresh_row``) unless ``--shared-server``: on one
in-memory server the rows of a run ran ever slower, every variant alike, as the server held
more finished runs (rows 1 and 6 of one run, the same code: 28.3 / 24.6 against 37.6 / 37.6
worker / server CPU-seconds for the same 800 turns and the same request counts), so a row's
figure depended on its place in the run.
"""

from __future__ import annotations

import ast
import contextlib
import os
import sys
import uuid
from pathlib import Path
from typing import Any, AsyncIterator, Optional

POSTGRES = os.environ.get("STATEKEEPER_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def postgres_database() -> str | None:
    """A fresh PostgreSQL database (None when PostgreSQL is not reachable)."""
    try:
        from sqlalchemy import create_engine, text  # noqa: PLC0415

        name = f"bench_turns_{uuid.uuid4().hex[:8]}"
        engine = create_engine(POSTGRES, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {name}"))
        engine.dispose()
        return POSTGRES.rsplit("/", 1)[0] + "/" + name
    except Exception as err:  # noqa: BLE001 - no server: SQLite instead, said in the output
        print(f"PostgreSQL not reachable ({type(err).__name__}); the system of record is SQLite")
        return None


def drop_database(url: str) -> None:
    """Drop a database of ``postgres_database``, its connections closed first; SQLite: nothing."""
    if not url.startswith("postgresql"):
        return
    from sqlalchemy import create_engine, text  # noqa: PLC0415

    name = url.rsplit("/", 1)[1]
    engine = create_engine(POSTGRES, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    finally:
        engine.dispose()


def shipped_dynamic_config(root: Path) -> dict[str, str]:
    """The dynamic config the embedded server of the code at ``root`` runs with (its
    ``starter/dev/server.py`` ``DYNAMIC_CONFIG``; none before there was one)."""
    tree = ast.parse((root / "starter" / "devserver.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DYNAMIC_CONFIG" for t in node.targets):
            return ast.literal_eval(node.value)
    return {}


async def dev_server(args: Any, config: Optional[dict[str, str]] = None) -> tuple[Any, str]:
    """A started dev server (``WorkflowEnvironment``) and its Prometheus metrics URL, with
    ``config`` as its dynamic config (None: statekeeper's, or none with ``args.server_defaults``),
    plus ``args.dynamic_config``."""
    from temporalio.testing import WorkflowEnvironment  # noqa: PLC0415

    from bench.turns.load import free_port  # noqa: PLC0415
    from starter.runtime.connection import data_converter  # noqa: PLC0415
    from starter.dev.server import DEV_SERVER_STARTUP, dynamic_config_args  # noqa: PLC0415
    from workflows.options import SEARCH_ATTRIBUTES  # noqa: PLC0415

    metrics_port = free_port()
    env = await WorkflowEnvironment.start_local(
        dev_server_startup_timeout=DEV_SERVER_STARTUP,
        dev_server_existing_path=str(Path(sys.executable).parent / "temporal"), data_converter=data_converter(),
        search_attributes=list(SEARCH_ATTRIBUTES), dev_server_log_level="error",
        dev_server_extra_args=["--metrics-port", str(metrics_port),
                               *(dynamic_config_args(config) if config is not None
                                 else [] if args.server_defaults else dynamic_config_args()),
                               *[a for kv in args.dynamic_config for a in ("--dynamic-config-value", kv)]])
    return env, f"http://127.0.0.1:{metrics_port}/metrics"


def backend_on(database: str) -> Any:
    """The retail system of record on ``database``, its schema created."""
    from settings import Settings  # noqa: PLC0415
    from systems.retail.backend import RetailBackend, make_engine  # noqa: PLC0415

    backend = RetailBackend(make_engine(Settings(database_url=database).resolved_database_url()))
    backend.create_schema()
    return backend


@contextlib.asynccontextmanager
async def fresh_row(args: Any, tmp: Path, worker_env: dict[str, str], config: Optional[dict[str, str]] = None
                    ) -> AsyncIterator[tuple[Any, str, dict, Any]]:
    """A row's own dev server (``dev_server``'s ``config``) and database: yields its client,
    metrics URL, the workers' environment pointed at both, and its retail backend; all gone
    after the block."""
    env, metrics_url = await dev_server(args, config)
    database = postgres_database() or f"sqlite:///{tmp / f'sor-{uuid.uuid4().hex[:6]}.sqlite'}"
    try:
        row_env = {**worker_env, "STATEKEEPER_TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
                   "STATEKEEPER_DATABASE_URL": database, "STATEKEEPER_JOURNAL_URL": database}
        yield env.client, metrics_url, row_env, backend_on(database)
    finally:
        await env.shutdown()
        drop_database(database)
