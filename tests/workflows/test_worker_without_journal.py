"""A worker that cannot reach the journal says so at start: ``python worker.py`` with its journal
database unreachable logs one warning line naming that database (its URL without the password;
no driver text, no traceback) and goes on serving, as the journal is an audit record that never
stops a conversation (docs/operators.md, "Refusals"; docs/concepts.md, "Decision log and
transcript"). Before, it started silently and only each journal write failed later."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "s3cret-journal-pw"
UNREACHABLE = f"postgresql+psycopg://statekeeper:{PASSWORD}@127.0.0.1:9/statekeeper_journal"  # nothing listens


async def _polled(client, settings) -> bool:
    request = DescribeTaskQueueRequest(namespace=settings.temporal_namespace, task_queue=TaskQueue(
        name=settings.task_queue), task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW)
    return bool((await client.workflow_service.describe_task_queue(request)).pollers)


async def test_an_unreachable_journal_is_named_in_one_warning_and_the_worker_goes_on(temporal_env, settings,
                                                                                      tmp_path):
    env = dict(os.environ, STATEKEEPER_TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host,
               STATEKEEPER_TASK_QUEUE=settings.task_queue, STATEKEEPER_DATA_DIR=str(tmp_path),
               STATEKEEPER_DATABASE_URL=settings.resolved_database_url(), STATEKEEPER_JOURNAL_URL=UNREACHABLE,
               STATEKEEPER_DEV_STATE_FILE=str(tmp_path / "no-dev.json"))
    env.pop("ANTHROPIC_API_KEY", None)
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log:
        worker = subprocess.Popen([sys.executable, "worker.py"], cwd=ROOT, env=env, stdout=log,
                                  stderr=subprocess.STDOUT)
        try:
            for _ in range(900):  # a new process imports the worker first: seconds on a loaded machine
                if await _polled(temporal_env.client, settings):
                    break
                assert worker.poll() is None, f"the worker exited: {log_path.read_text()}"
                await asyncio.sleep(0.1)
            else:
                raise AssertionError(f"the worker never polled: {log_path.read_text()}")
            assert worker.poll() is None  # it goes on
        finally:
            worker.terminate()
            worker.wait(timeout=60)
    logged = log_path.read_text()
    warnings = [line for line in logged.splitlines() if "journal database" in line]
    assert len(warnings) == 1, logged
    [warning] = warnings
    assert "WARNING" in warning and "127.0.0.1:9/statekeeper_journal" in warning, warning
    assert "cannot be reached" in warning and "goes on without it" in warning, warning
    assert PASSWORD not in logged and "Traceback" not in logged and "psycopg.OperationalError" not in logged, logged
    assert f"worker polling {settings.task_queue}" in logged, logged
