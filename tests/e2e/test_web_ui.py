"""The Temporal Web UI as an operator uses it:

- in a real browser: Debian's Chromium driven by Playwright (``executable_path``: no browser
  download), against the embedded dev server with its Web UI (``starter.dev.server``), a real
  worker and a conversation left pending. The operator opens the run and reads its current
  step in Current Details (Markdown rendered in an iframe), then finds the run in the workflow
  list filtered by ``OrderIds`` and by the customer's pseudonym (the links ``statekeeper link``
  prints). Screenshots go to the test's output folder; with ``STATEKEEPER_SAVE_SCREENSHOTS=1``
  the three docs/operators.md shows are copied to ``docs/img/``;
- ``statekeeper link`` as an operator runs it (a real process), and its query against a real
  Temporal server: the link for a customer or an order lists exactly their runs; bad input and
  an invalid setting are refused in one line, and no key is made.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import pytest
from typer.testing import CliRunner

from settings import Settings
from starter.api.codec_server import codec_beside
from starter.cli.app import app
from starter.cli.links import list_query, list_url
from starter.dev.server import embedded_temporal
from starter.runtime.connection import connect
from tests.ports import free_port
from tests.policy_fixtures import CUSTOMER, DELIVERED, EMAIL, PENDING
from tests.workflow_harness import ListBrain, call, reply, running_worker
from workflows.domain.policy.approvals import ApprovalPolicy
from workflows.domain.pseudonym import customer_pseudonym
from workflows.options import CUSTOMER_ID, PENDING_APPROVAL


# --- In the browser ---

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking"]
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"

PENDING_STEP = "awaiting_approval"
"""The step the conversation is left in: ``awaiting_approval`` (the cancel of #W4566809,
$826.70, is over the default $500.00 threshold: the user says yes and the write waits for a
supervisor), or ``awaiting_confirmation`` (the one-line switch: no yes, no approval)."""



@pytest.fixture
def playwright_api():
    """Playwright's async API; a missing browser or package fails the test (CI installs both:
    ``.ci/run`` and the ``test`` extra) unless ``STATEKEEPER_SKIP_BROWSER=1`` says to skip it."""
    missing = [] if CHROMIUM.exists() else [f"{CHROMIUM} (apt-get install -y chromium)"]
    try:
        from playwright import async_api
    except ImportError:
        missing.append("playwright (pip install -e '.[test]')")
    if missing and os.environ.get("STATEKEEPER_SKIP_BROWSER") == "1":
        pytest.skip("browser test skipped: missing " + ", ".join(missing))
    assert not missing, "the Web UI browser test needs " + ", ".join(missing)
    return async_api


async def _drive_to_pending(client) -> str:
    cid = await client.start_conversation(f"ui-{uuid.uuid4().hex[:6]}")
    await client.send_message(cid, f"Hi, my email is {EMAIL}; where are {PENDING} and {DELIVERED}?")
    answer = await client.send_message(cid, f"Please cancel {PENDING}, I no longer need it")
    assert answer.awaiting_confirmation
    if PENDING_STEP == "awaiting_approval":
        answer = await client.send_message(cid, "yes")
        assert getattr(answer, "awaiting_approval", None), answer
    return cid


async def _wait_for_pseudonym(client, workflow_id: str, timeout_seconds: float = 20.0) -> str:
    deadline = time.monotonic() + timeout_seconds
    while True:
        value = (await client.get_workflow_handle(workflow_id).describe()).typed_search_attributes.get(CUSTOMER_ID)
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.2)


def playwright_error() -> type:
    """Playwright's error type (imported here: the module loads without Playwright installed)."""
    from playwright.async_api import Error  # noqa: PLC0415

    return Error


async def _current_details(page, timeout_seconds: float = 30.0) -> str:
    """The text of the Current Details iframe on a workflow page: Markdown rendered under
    ``/render?content=...`` (the static summary is another such frame; ours names the step)."""
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        for frame in page.frames:
            if "/render" in frame.url:
                try:
                    text = await frame.locator("body").inner_text(timeout=5_000)
                except playwright_error() as err:  # the UI re-rendered it meanwhile: read again (CI, once)
                    if "detached" not in str(err).lower():
                        raise
                    continue
                if "Current step:" in text:
                    return text
        await asyncio.sleep(0.5)
    raise AssertionError(f"no current-details frame among {[f.url[:80] for f in page.frames]}")


async def _row_with_columns(page, names: tuple[str, ...], shot: Path) -> str:
    """Add the search attributes ``names`` as columns of the open list as docs/operators.md says
    (Configure Columns, then + beside each under Available Columns) and return the first row's text."""
    await page.get_by_role("button", name="Configure Columns").click()
    for name in names:
        entry = page.locator("li", has=page.get_by_text(name, exact=True)).filter(
            has=page.get_by_role("button")).last
        await entry.get_by_role("button").last.click()
    await page.get_by_role("button", name="Close drawer").or_(page.get_by_role("button", name="Close")).first.click()
    await page.set_viewport_size({"width": 2000, "height": 700})
    await page.wait_for_timeout(500)
    await page.screenshot(path=str(shot))
    return await page.locator("table tbody tr").first.inner_text()


async def _list_shows(page, url: str, workflow_id: str, shot: Path) -> None:
    """Open a filtered list; the run's link must appear (visibility is eventually consistent)."""
    await page.goto(url)
    row = page.get_by_role("link", name=workflow_id)
    try:
        await row.first.wait_for(timeout=30_000)
    finally:
        await page.screenshot(path=str(shot), full_page=True)


async def test_operator_finds_the_pending_conversation_and_reads_its_current_details(tmp_path, playwright_api):
    port, ui_port = free_port(), free_port()
    settings = Settings(temporal_address=f"127.0.0.1:{port}", ui_port=ui_port, data_dir=tmp_path, codec_port=free_port(),
                        database_url=f"sqlite:///{tmp_path / 'statekeeper.sqlite'}", anthropic_api_key=None,
                        task_queue=f"ui-{uuid.uuid4().hex[:6]}", sandbox_project_modules=True)
    brain = ListBrain([call("find_user_id_by_email", email=EMAIL), call("get_user_details", user_id=CUSTOMER),
                       call("get_order_details", order_id=PENDING), call("get_order_details", order_id=DELIVERED),
                       reply("I found both orders."),
                       call("cancel_pending_order", order_id=PENDING, reason="no longer needed")])
    ui = f"http://127.0.0.1:{ui_port}"
    # payloads are encrypted: the Web UI reads them through the codec server, as under `statekeeper dev`
    async with embedded_temporal(settings, persist=False) as started, codec_beside(settings):
        assert started  # our own server with its Web UI, not one another test left running
        client = await connect(settings)
        approvals = ApprovalPolicy() if PENDING_STEP == "awaiting_approval" else None  # the default threshold
        async with running_worker(SimpleNamespace(client=client), settings, brain=brain,
                                  approvals=approvals) as (statekeeper, _):
            cid = await _drive_to_pending(statekeeper)
            workflow_id = f"support-{cid}"
            pseudonym = await _wait_for_pseudonym(client, workflow_id)
            assert pseudonym == customer_pseudonym(CUSTOMER, settings.pseudonym_secret())
            async with playwright_api.async_playwright() as pw:
                browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
                page = await browser.new_page(viewport={"width": 1400, "height": 1000})
                try:
                    await page.goto(f"{ui}/namespaces/default/workflows/{workflow_id}")
                    await page.get_by_text("User Metadata").first.click()
                    details = await _current_details(page)
                    await page.screenshot(path=str(tmp_path / "current-details.png"), full_page=True)
                    assert f"Current step: {PENDING_STEP}" in details, details
                    if PENDING_STEP == "awaiting_confirmation":
                        assert f"cancel_pending_order — order_id: {PENDING}" in details
                    assert pseudonym in details and EMAIL not in details and CUSTOMER not in details
                    if PENDING_STEP == "awaiting_approval":
                        approval_id = (await client.get_workflow_handle(workflow_id).describe()
                                       ).typed_search_attributes.get(PENDING_APPROVAL)
                        assert approval_id and (f"Approval pending: {approval_id} — cancel_pending_order on {PENDING}, "
                                                f"amount 826.70") in details, details

                    await _list_shows(page, list_url(ui, "default", list_query(order_id=DELIVERED)), workflow_id,
                                      tmp_path / "list-by-order.png")
                    await _list_shows(page, list_url(ui, "default", list_query(pseudonym)), workflow_id,
                                      tmp_path / "list-by-customer.png")
                    row = await _row_with_columns(page, ("Step", "PendingApproval", "CustomerId"),
                                                  tmp_path / "list-columns.png")
                    # Temporal's own Status column is the run's execution status, not our ProcessStatus
                    assert "RUNNING" in row and PENDING_STEP in row and pseudonym in row, row
                    if PENDING_STEP == "awaiting_approval":
                        assert approval_id in row, row
                finally:
                    await browser.close()
    if os.environ.get("STATEKEEPER_SAVE_SCREENSHOTS") == "1":
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        for name in ("current-details.png", "list-by-customer.png", "list-by-order.png", "list-columns.png"):
            shutil.copy(tmp_path / name, DOCS_IMG / f"web-ui-{name}")


# --- statekeeper link ---

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
    """``link`` reads its settings as every other command does: STATEKEEPER_TOKEN_BUDGET=0 is one
    line, not a pydantic ``ValidationError`` traceback."""
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
