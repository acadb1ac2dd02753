"""Cost of exactly-once: a ledgered write vs a replayed write vs a plain read.

For each database (SQLite file, and PostgreSQL when reachable) it seeds a store, then
times, in the same process: ``read`` of an order (baseline), ``write`` that applies a
cancellation with a new idempotency key (effect + ledger row in one transaction), and
``write`` again with the same key (the ledger returns the recorded result). Figures are
milliseconds per operation (median of N); ratios are against the read.

Run: ``.venv/bin/python bench/write_path.py [-n 200] [--postgres URL]``. ``--postgres`` names the
server (any database on it to connect to); the run creates a database of its own there and drops
it afterwards, so no tables are shared with anything else.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import track  # noqa: E402
from rich.table import Table  # noqa: E402

from systems.retail import load_data  # noqa: E402
from systems.retail.backend import RetailBackend, make_engine  # noqa: E402


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def measure(url: str, n: int) -> dict[str, float]:
    backend = RetailBackend(make_engine(url))
    backend.create_schema()
    store = f"bench-{uuid.uuid4().hex[:8]}"
    backend.seed_store(f"{store}-warm")  # loads the template once
    seed_ms = _timed(lambda: backend.seed_store(store))
    backend.drop_store(f"{store}-warm")
    pending = [oid for oid, o in load_data()["orders"].items() if o["status"] == "pending"][:n]
    reads, writes, replays = [], [], []
    try:
        for order_id in track(pending, description=url.split(":")[0]):
            key = f"cancel_pending_order:{order_id}:{uuid.uuid4()}"
            args = {"order_id": order_id, "reason": "no longer needed"}
            reads.append(_timed(lambda: backend.read(store, "get_order_details", {"order_id": order_id})))
            writes.append(_timed(lambda: backend.write(store, "cancel_pending_order", args, key)))
            replays.append(_timed(lambda: backend.write(store, "cancel_pending_order", args, key)))
        assert backend.duplicate_writes(store) == 0
    finally:
        backend.drop_store(store)
    return {"read": statistics.median(reads), "write": statistics.median(writes),
            "replay": statistics.median(replays), "n": len(pending), "seed": seed_ms}


@contextlib.contextmanager
def scratch_database(server_url: str) -> Iterator[str]:
    """A new, empty PostgreSQL database on ``server_url``'s server for this run; dropped after."""
    admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    name = f"statekeeper_bench_{uuid.uuid4().hex[:10]}"
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        yield sa.make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=200)
    parser.add_argument("--postgres", default=os.environ.get("STATEKEEPER_TEST_POSTGRES_URL",
                                                             "postgresql+psycopg://postgres@127.0.0.1:5432/test"),
                        help="a PostgreSQL server to create this run's own database on")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        results["sqlite"] = measure(f"sqlite:///{tmp}/bench.sqlite", args.n)
    try:
        with scratch_database(args.postgres) as url:
            results["postgresql"] = measure(url, args.n)
    except Exception as err:  # noqa: BLE001 - a missing server only skips that row
        print(f"postgresql skipped: {err}")
    table = Table(title="Write path, ms per operation (median)")
    for col in ("database", "n", "read (baseline)", "ledgered write", "replayed write", "write/read", "replay/read",
                "seed a store"):
        table.add_column(col, justify="right")
    for name, r in results.items():
        table.add_row(name, str(r["n"]), f"{r['read']:.2f}", f"{r['write']:.2f}", f"{r['replay']:.2f}",
                      f"{r['write'] / r['read']:.1f}x", f"{r['replay'] / r['read']:.1f}x", f"{r['seed']:.1f}")
    Console(width=140).print(table)


if __name__ == "__main__":
    main()
