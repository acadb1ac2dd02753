"""One system of record per task queue, on the real dev server:

- at startup, a worker whose database differs from the one the queue's live workers serve
  refuses to start before it polls (an activity-only worker counts too, a stopped one only
  within the live window, and a worker without the payments URL refuses a queue that has it);
  workers on the same database scale out;
- the startup check only sees workers that are polling right now, so a conversation is also
  bound to the system of record that answered its first tool call: a worker on another
  database that later takes its calls refuses them before acting, and a confirmed cancel never
  lands in the wrong database (two workers one after the other on the same task queue, each
  on its own SQLite database).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.worker import Worker

from settings import Settings
from starter.client.conversations import StatekeeperClient
from starter.runtime.preflight import StartupRefused, check_task_queue
from starter.runtime.rpc import read_again_if_dropped
from starter.runtime.system_of_record import fingerprint, fingerprint_in_identity, worker_identity
from starter.runtime.worker import build_backend, build_worker, preflight, run_worker
from systems.retail.backend import RetailBackend
from tests.policy_fixtures import EMAIL, PENDING
from tests.workflow_harness import NO_APPROVALS, order_details, running_worker


# --- Startup ---

ROOT = Path(__file__).resolve().parents[2]


def _sibling(settings: Settings, folder: Path) -> Settings:
    """The same task queue and server, another database (its own data directory)."""
    return settings.model_copy(update={"data_dir": folder, "database_url": f"sqlite:///{folder / 'other.sqlite'}"})


def _address(temporal_env) -> str:
    return temporal_env.client.service_client.config.target_host


async def _pollers(client, settings: Settings, kind=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW) -> list[str]:
    request = DescribeTaskQueueRequest(namespace=settings.temporal_namespace,
                                       task_queue=TaskQueue(name=settings.task_queue), task_queue_type=kind)
    # a call the connection dropped in flight ("operation was canceled", once in CI) is asked
    # once more, as the client and the worker's startup checks do
    described = await read_again_if_dropped(lambda: client.workflow_service.describe_task_queue(request))
    return [p.identity for p in described.pollers]


async def _until_polled(client, settings: Settings, count: int = 1, seconds: float = 10.0,
                        process: subprocess.Popen | None = None) -> list[str]:
    """The queue's poller identities once ``count`` poll; fails after ``seconds`` or as soon as
    ``process`` (the worker being waited for) exits."""
    for _ in range(int(seconds * 10)):
        found = await _pollers(client, settings)
        if len(found) >= count:
            return found
        assert process is None or process.poll() is None, "the worker process exited"
        await asyncio.sleep(0.1)
    raise AssertionError(f"no {count} pollers on {settings.task_queue}")


async def _cancel_through(client: StatekeeperClient, cid: str) -> None:
    await client.start_conversation(cid)
    await client.send_message(cid, f"Hi, my email is {EMAIL}")
    reply = await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
    assert reply.awaiting_confirmation
    await client.send_message(cid, "yes")


def _status(backend: RetailBackend, order_id: str) -> str:
    return json.loads(backend.read("main", "get_order_details", {"order_id": order_id}))["status"]


async def test_a_worker_on_another_database_refuses_and_the_first_keeps_serving(temporal_env, settings, tmp_path):
    client = temporal_env.client
    other = _sibling(settings, tmp_path / "elsewhere").model_copy(update={"temporal_address": _address(temporal_env)})
    backend = build_backend(settings)
    async with build_worker(client, settings, backend):
        [identity] = await _until_polled(client, settings)
        assert fingerprint_in_identity(identity) == fingerprint(settings.resolved_database_url())
        with pytest.raises(StartupRefused) as refused:
            await run_worker(other)  # the CLI's `statekeeper worker`: refused before it polls
        message = str(refused.value)
        assert f"task queue '{settings.task_queue}'" in message and "another system of record" in message
        assert "STATEKEEPER_DATA_DIR" in message and "STATEKEEPER_TASK_QUEUE" in message
        assert "other.sqlite" not in message and str(tmp_path) not in message  # no URL, no path
        # state intact: the refused worker never polled nor seeded its database; the first one serves
        assert await _pollers(client, settings) == [identity]
        assert not (tmp_path / "elsewhere" / "other.sqlite").exists()
        sk = StatekeeperClient(client, settings.task_queue, settings.write_timeout_seconds, approvals=NO_APPROVALS)
        await _cancel_through(sk, "sor-first-keeps-serving")
        assert _status(backend, PENDING) == "cancelled"
        assert [op.tool for op in (await sk.state("sor-first-keeps-serving")).completed_operations] == [
            "cancel_pending_order"]


async def test_workers_on_the_same_database_scale_out(temporal_env, settings, tmp_path):
    """A second worker process (``statekeeper worker``) on the same database joins the queue."""
    client = temporal_env.client
    backend = build_backend(settings)
    env = dict(os.environ, STATEKEEPER_TEMPORAL_ADDRESS=_address(temporal_env), STATEKEEPER_TASK_QUEUE=settings.task_queue,
               STATEKEEPER_DATABASE_URL=settings.resolved_database_url(), STATEKEEPER_DATA_DIR=str(settings.data_dir),
               STATEKEEPER_DEV_STATE_FILE=str(tmp_path / "no-dev.json"))
    env.pop("ANTHROPIC_API_KEY", None)
    async with build_worker(client, settings, backend):
        await _until_polled(client, settings)
        log = open(tmp_path / "second-worker.log", "wb")
        second = subprocess.Popen([sys.executable, "-m", "starter.cli.app", "worker"], cwd=ROOT, env=env,
                                  stdout=log, stderr=subprocess.STDOUT)
        try:
            # a new process imports the worker first: seconds on a loaded CI machine
            identities = await _until_polled(client, settings, count=2, seconds=90, process=second)
            assert len({fingerprint_in_identity(i) for i in identities}) == 1  # one system of record
            sk = StatekeeperClient(client, settings.task_queue, settings.write_timeout_seconds, approvals=NO_APPROVALS)
            await _cancel_through(sk, "sor-scale-out")
            assert second.poll() is None, (tmp_path / "second-worker.log").read_text()
        finally:
            second.terminate()
            second.wait(timeout=30)
            log.close()
    logged = (tmp_path / "second-worker.log").read_text()
    assert f"worker polling {settings.task_queue}" in logged, logged  # `statekeeper worker` configures logging
    assert _status(backend, PENDING) == "cancelled"
    assert len(backend.ledger_entries("main")) == 1 and backend.duplicate_writes("main") == 0


@activity.defn(name="stray_activity")
async def _stray_activity() -> None:
    return None


async def test_an_activity_only_worker_of_another_database_is_seen_too(temporal_env, settings, tmp_path):
    """The activity queue is checked as well as the workflow queue: activities apply the writes."""
    client = temporal_env.client
    theirs = fingerprint(f"sqlite:///{tmp_path / 'theirs.sqlite'}")
    async with Worker(client, task_queue=settings.task_queue, activities=[_stray_activity],
                      identity=worker_identity(theirs)):
        for _ in range(100):
            if await _pollers(client, settings, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
                break
            await asyncio.sleep(0.1)
        assert await _pollers(client, settings) == []  # no workflow poller at all
        with pytest.raises(StartupRefused, match="its activity poller"):
            await preflight(client, settings)


async def test_a_stopped_worker_counts_only_within_the_live_window(temporal_env, settings, tmp_path):
    client = temporal_env.client
    mine = fingerprint(settings.resolved_database_url())
    other = _sibling(settings, tmp_path / "elsewhere")
    other.data_dir.mkdir()
    async with build_worker(client, other):
        await _until_polled(client, other)
    stopped_at = time.time()
    # the server still lists the stopped worker: within the window it is taken as live...
    with pytest.raises(StartupRefused):
        await check_task_queue(client, settings.temporal_namespace, settings.task_queue, mine)
    await asyncio.sleep(max(0.0, stopped_at + 2.5 - time.time()))
    # ...past it, it is not (the default window is longer than the server's long poll)
    await check_task_queue(client, settings.temporal_namespace, settings.task_queue, mine, live_within_seconds=2.0)


async def test_a_worker_without_the_payments_url_refuses_to_join_a_queue_that_has_it(temporal_env, settings):
    """Same database, other services: a worker started without STATEKEEPER_PAYMENTS_URL would
    run refunds without their payments mirror; it refuses before it polls, naming what differs."""
    client = temporal_env.client
    address = {"temporal_address": _address(temporal_env)}
    mirrored = settings.model_copy(update={"payments_url": "http://127.0.0.1:1/", **address})
    async with build_worker(client, mirrored, build_backend(mirrored)):
        [identity] = await _until_polled(client, settings)
        with pytest.raises(StartupRefused) as refused:
            await run_worker(settings.model_copy(update=address))
        message = str(refused.value)
        assert f"task queue '{settings.task_queue}'" in message and "other external services" in message
        assert "that worker uses a payments service and this one has none" in message
        assert "STATEKEEPER_PAYMENTS_URL" in message and "127.0.0.1" not in message  # no URL
        assert await _pollers(client, settings) == [identity]  # the refused worker never polled
        with pytest.raises(StartupRefused, match="both use the same services at different URLs"):
            await run_worker(mirrored.model_copy(update={"payments_url": "http://127.0.0.1:2"}))
        # the same services (the URL written another way) join: the check itself passes
        await preflight(client, mirrored.model_copy(update={"payments_url": "HTTP://127.0.0.1:1"}))


# --- A conversation bound to its system of record ---

async def test_a_worker_on_another_database_refuses_a_bound_conversation(temporal_env, settings, tmp_path):
    other = settings.model_copy(update={"database_url": f"sqlite:///{tmp_path / 'other.sqlite'}"})
    cid = f"bound-{uuid.uuid4().hex[:6]}"
    async with running_worker(temporal_env, settings) as (client, first):
        await client.start_conversation(cid)
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        shown = await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        assert shown.awaiting_confirmation
        bound = (await client.state(cid)).system_of_record
        assert bound  # the fingerprint of the first worker's database
    async with running_worker(temporal_env, other) as (client, second):
        reply = await client.send_message(cid, "yes")
        state = await client.state(cid)
        assert state.system_of_record == bound and reply.status == "active"
        [op] = state.completed_operations
        assert not op.ok and "another system of record" in op.result
        assert second.ledger_entries("main") == [] and order_details(second, PENDING)["status"] == "pending"
    assert first.ledger_entries("main") == [] and order_details(first, PENDING)["status"] == "pending"
