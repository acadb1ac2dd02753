"""Startup against a Temporal server that lacks our search attributes: the worker registers
them, and conversations then run (without them every workflow task would fail with
"unexpected workflow task failure"); an attribute registered with another type stops startup
with its name in the message, changing nothing on the server."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Iterator

import pytest
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest

from starter.client.conversations import StatekeeperClient
from starter.dev.server import temporal_binary, wait_until_reachable
from starter.runtime.preflight import StartupRefused
from starter.dev.stack import connect_with_retry, runtime
from tests.policy_fixtures import EMAIL
from tests.workflow_harness import NO_APPROVALS
from workflows.options import CUSTOMER_ID, ORDER_IDS, SEARCH_ATTRIBUTES, STEP
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def _bare_server(tmp_path: Path, *attributes: str) -> Iterator[str]:
    """A real ``temporal server start-dev`` (in memory, no Web UI) with only ``attributes``
    (``Name=Type``) registered, not ours; yields its address."""
    port = free_port()
    cmd = [str(temporal_binary()), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port), "--headless",
           "--log-level", "error"]
    for attribute in attributes:
        cmd += ["--search-attribute", attribute]
    log_path = tmp_path / f"temporal-{port}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until_reachable(f"127.0.0.1:{port}", proc, "bare dev server", log_path, 60)
            yield f"127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(timeout=15)


async def _custom_attributes(client) -> dict[str, int]:
    listed = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace="default"))
    return dict(listed.custom_attributes)


async def test_startup_registers_missing_attributes_and_conversations_run(settings, tmp_path):
    with _bare_server(tmp_path) as address:
        settings = settings.model_copy(update={"temporal_address": address})
        client = await connect_with_retry(settings)
        assert not {key.name for key in SEARCH_ATTRIBUTES} & set(await _custom_attributes(client))
        async with runtime(settings) as rt:  # what chat, state, taubench and dev run
            assert not rt.started_server
            registered = await _custom_attributes(client)
            assert {key.name: registered.get(key.name) for key in SEARCH_ATTRIBUTES} == {
                key.name: key.indexed_value_type for key in SEARCH_ATTRIBUTES}
            assert registered[ORDER_IDS.name] == IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST
            sk = StatekeeperClient(rt.client, settings.task_queue, settings.write_timeout_seconds, approvals=NO_APPROVALS)
            cid = await sk.start_conversation(f"attrs-{uuid.uuid4().hex[:6]}")
            reply = await sk.send_message(cid, f"Hi, my email is {EMAIL}")  # upserts CustomerId, Step
            assert reply.status == "active"
            described = await rt.client.get_workflow_handle(f"support-{cid}").describe()
            assert described.typed_search_attributes.get(CUSTOMER_ID)  # set, so registered in time
        async with runtime(settings):  # the next start finds them all: nothing to add
            assert await _custom_attributes(client) == registered


async def test_a_mistyped_attribute_stops_startup_naming_it(settings, tmp_path):
    with _bare_server(tmp_path, f"{STEP.name}=Int") as address:
        settings = settings.model_copy(update={"temporal_address": address})
        client = await connect_with_retry(settings)
        before = await _custom_attributes(client)
        with pytest.raises(StartupRefused) as refused:
            async with runtime(settings):
                raise AssertionError("started against a mistyped search attribute")
        assert "Step is Int (needs Keyword)" in str(refused.value)
        assert await _custom_attributes(client) == before  # nothing registered half-way
        assert not (Path(settings.data_dir) / "statekeeper.sqlite").exists()  # no worker, no seeding

        # the same from the command line: a clear message, exit status 2, no traceback
        env = dict(os.environ, STATEKEEPER_TEMPORAL_ADDRESS=address, STATEKEEPER_DATA_DIR=str(tmp_path / "cli"),
                   STATEKEEPER_DEV_STATE_FILE=str(tmp_path / "no-dev.json"), COLUMNS="300")
        done = subprocess.run([sys.executable, "-m", "starter.cli.app", "worker"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        output = " ".join((done.stdout + done.stderr).split())
        assert done.returncode == 2, output
        assert "Step is Int (needs Keyword)" in output and "Traceback" not in output
        assert await _custom_attributes(client) == before

