"""``statekeeper link`` as an operator runs it (a real process), and its query against a
real Temporal server: the link for a customer or an order lists exactly their runs."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from typer.testing import CliRunner

from settings import Settings
from starter.cli.app import app
from starter.cli.links import list_query
from tests.policy_fixtures import CUSTOMER, DELIVERED, EMAIL, PENDING
from tests.workflow_harness import ListBrain, call, reply, running_worker
from workflows.domain.pseudonym import customer_pseudonym

ROOT = Path(__file__).resolve().parents[2]


def _link(data_dir: Path, *args: str):
    """``statekeeper link ARGS`` in this process (typer's runner: the real command, its
    exit code and streams); ``_link_process`` runs it as a separate process."""
    env = {"STATEKEEPER_DATA_DIR": str(data_dir), "STATEKEEPER_UI_PORT": "8299", "STATEKEEPER_PSEUDONYM_KEY": None}
    return CliRunner().invoke(app, ["link", *args], env=env)


def _link_process(data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, STATEKEEPER_DATA_DIR=str(data_dir), STATEKEEPER_UI_PORT="8299")
    env.pop("STATEKEEPER_PSEUDONYM_KEY", None)
    return subprocess.run([sys.executable, "-m", "starter.cli.app", "link", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def _query_of(url: str) -> str:
    parts = urlsplit(url.strip())
    assert (parts.scheme, parts.netloc, parts.path) == ("http", "127.0.0.1:8299", "/namespaces/default/workflows")
    return parse_qs(parts.query)["query"][0]


def test_link_prints_the_list_url_of_a_customer_by_pseudonym_and_of_an_order(tmp_path):
    key = Settings(data_dir=tmp_path).pseudonym_secret()  # the key file the worker made
    by_customer = _link_process(tmp_path, "--customer", CUSTOMER)  # as an operator runs it
    assert by_customer.returncode == 0, by_customer.stderr
    assert CUSTOMER not in by_customer.stdout  # the real id (it holds a name) is not in the link
    assert _query_of(by_customer.stdout) == f'CustomerId="{customer_pseudonym(CUSTOMER, key)}"'

    by_order = _link(tmp_path, "--order", "W4566809")  # the '#' is optional
    assert _query_of(by_order.stdout) == 'OrderIds="#W4566809"'
    assert "%23W4566809" in by_order.stdout  # URL-encoded: a bare '#' would start a fragment

    both = _link(tmp_path, "--customer", CUSTOMER, "--order", PENDING)
    assert _query_of(both.stdout) == f'CustomerId="{customer_pseudonym(CUSTOMER, key)}" AND OrderIds="{PENDING}"'


def test_link_refuses_bad_input_and_never_makes_a_key(tmp_path):
    nothing = _link(tmp_path)
    assert nothing.exit_code == 2 and "give --customer ID or --order ID" in nothing.stderr
    no_key = _link(tmp_path / "elsewhere", "--customer", CUSTOMER)
    assert no_key.exit_code == 2 and "no pseudonym key" in no_key.stderr and no_key.stdout == ""
    assert not (tmp_path / "elsewhere" / "pseudonym.key").exists()  # a new random key would match nothing
    for bad in ('#W1" OR CustomerId!="x', "#W1\\", "x" * 101):
        refused = _link(tmp_path, "--order", bad)
        assert refused.exit_code == 2 and "without quotes" in refused.stderr and refused.stdout == ""



def test_link_with_an_invalid_setting_is_one_line_naming_it(tmp_path, monkeypatch):
    """``link`` read its settings itself: STATEKEEPER_TOKEN_BUDGET=0 ended it with a pydantic
    ``ValidationError`` traceback, where every other command says one line."""
    monkeypatch.setenv("STATEKEEPER_TOKEN_BUDGET", "0")
    refused = _link(tmp_path, "--order", "W4566809")
    said = " ".join(refused.stderr.split())
    assert refused.exit_code == 2 and refused.stdout == "", refused.output
    assert "invalid setting: STATEKEEPER_TOKEN_BUDGET" in said and "ValidationError" not in said, said


async def _listed(client, query: str, expected: set[str], timeout_seconds: float = 20.0) -> set[str]:
    deadline = time.monotonic() + timeout_seconds
    while True:
        found = {w.id async for w in client.list_workflows(query)}
        if found >= expected or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.3)


async def test_the_link_queries_find_exactly_the_runs_of_the_customer_and_of_the_order(temporal_env, settings):
    brain = ListBrain([call("find_user_id_by_email", email=EMAIL), call("get_user_details", user_id=CUSTOMER),
                       call("get_order_details", order_id=PENDING), call("get_order_details", order_id=DELIVERED),
                       reply("Here they are.")])
    async with running_worker(temporal_env, settings, brain=brain) as (client, _):
        cid = await client.start_conversation(f"link-{uuid.uuid4().hex[:6]}")
        other = await client.start_conversation(f"link-other-{uuid.uuid4().hex[:6]}")  # no customer, no order
        await client.send_message(cid, f"Hi, my email is {EMAIL}; where are {PENDING} and {DELIVERED}?")
        pseudonym = customer_pseudonym(CUSTOMER, settings.pseudonym_secret())
        scope = f' AND TaskQueue="{settings.task_queue}"'  # runs of other tests share the server
        for query in (list_query(pseudonym) + scope, list_query(order_id=DELIVERED) + scope,
                      list_query(pseudonym, PENDING) + scope):
            assert await _listed(temporal_env.client, query, {f"support-{cid}"}) == {f"support-{cid}"}, query
        assert await _listed(temporal_env.client, list_query(order_id="#W0000000") + scope, set(), 1) == set()
        assert f"support-{other}" not in await _listed(temporal_env.client, list_query(pseudonym) + scope, set(), 1)
