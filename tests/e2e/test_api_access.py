"""Who may reach the HTTP API, from the outside:

- whether the API may start, and with which authentication: the real ``statekeeper api``,
  ``statekeeper keys`` and ``uvicorn starter.api:app`` processes over real HTTP. No Temporal
  server runs (the API answers 503 for what needs one, which is enough to see 401s and a
  served request). Also the keyless app's refusal of non-loopback callers;
- the keyless loopback servers (``statekeeper api``/``dev`` without API keys, and ``dev``'s codec
  server) refuse what a browser on this machine sends for a web page elsewhere. A browser is a
  loopback caller for every site it opens: the ``Host`` must name a loopback address (no DNS
  rebinding: ``Host: attacker.example`` reading every transcript as its own origin) and an
  ``Origin`` must be a page served on one, or a configured codec CORS origin (no cross-site
  bodiless ``POST /conversations/{id}/cancel``, which browsers send without a preflight);
- ``statekeeper keys`` and the labels and scopes people give keys (real processes, a real
  SQLite journal): a label is shown to operators in ``keys list``, so it must not carry
  terminal escape sequences (one that retitles or clears the operator's terminal), and one over
  the 200 characters the table keeps is refused rather than cut silently; a customer scope that
  is no customer id (an unset shell variable) is refused.

Keys, tenancy and roles on a running stack are tests/e2e/test_api_auth.py.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from activities.store.api_keys import KeyStore, Role, api_keys
from settings import Settings
from starter.api.application import create_app
from starter.api.auth import access_from_settings
from starter.api.codec_server import codec_app, local_access
from starter.cli.app import app as cli
from starter.runtime.codec import payload_codec
from starter.runtime.preflight import StartupRefused
from tests.ports import free_port


# --- Whether the API may start, and how ---

BIN = Path(sys.executable).parent


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A process environment with its own data directory and dev state file, and a Temporal
    address nothing listens on."""
    return {**os.environ, "STATEKEEPER_DATA_DIR": str(tmp_path), "STATEKEEPER_TEMPORAL_ADDRESS": "127.0.0.1:1",
            "STATEKEEPER_DEV_STATE_FILE": str(tmp_path / "dev.json"), "NO_COLOR": "1", "COLUMNS": "200"}


def _run(env: dict[str, str], *args: str):
    """``statekeeper <args>`` in this process (the key commands need no server): a click Result."""
    return CliRunner().invoke(cli, list(args), env=env)


class Serving:
    """A server process started with ``command``; its output is read until it listens."""

    def __init__(self, command: list[str], env: dict[str, str], port: int) -> None:
        self.port, self.output = port, ""
        self.proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def wait_listening(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.finish()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"not listening: {self.finish()}")

    def finish(self) -> str:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.output += self.proc.communicate(timeout=15)[0]
        return self.output


def _refused_to_start(command: list[str], env: dict[str, str], port: int) -> tuple[int, str]:
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    with socket.socket() as s:  # and nothing was left listening
        assert s.connect_ex(("127.0.0.1", port)) != 0
    return proc.returncode, proc.stdout + proc.stderr


def test_a_non_loopback_bind_without_keys_refuses_to_start(env):
    port = free_port()
    code, output = _refused_to_start([str(BIN / "statekeeper"), "api", "--host", "0.0.0.0", "--port", str(port)],
                                     env, port)
    assert code == 2 and "refusing to serve the API on 0.0.0.0 without API keys" in " ".join(output.split())
    assert "Traceback" not in output and "statekeeper keys create" in output
    # the app served by a bare ASGI server cannot know its bind: without keys it never starts
    code, output = _refused_to_start([str(BIN / "uvicorn"), "starter.api:app", "--host", "0.0.0.0",
                                      "--port", str(port)], env, port)
    assert code != 0 and "ERROR:    statekeeper: refusing to serve the API where its bind address is not known" in output
    # one line in the container's log, not Starlette's traceback ending in the exception's class
    assert "Traceback" not in output and "StartupRefused" not in output, output
    # an invalid setting likewise, named as the commands name it
    code, output = _refused_to_start([str(BIN / "uvicorn"), "starter.api:app", "--port", str(port)],
                                     {**env, "STATEKEEPER_RPC_TIMEOUT_SECONDS": "nan"}, port)
    assert code != 0 and "statekeeper: invalid setting: STATEKEEPER_RPC_TIMEOUT_SECONDS: " in output, output
    assert "Traceback" not in output and "ValidationError" not in output, output
    # a revoked key is no key
    key_id = _run(env, "keys", "create", "--tenant", "default", "--role", "service").stderr.split()[2]
    assert _run(env, "keys", "revoke", key_id).exit_code == 0
    settings = Settings(data_dir=env["STATEKEEPER_DATA_DIR"])
    with pytest.raises(StartupRefused, match="without API keys"):
        access_from_settings(settings, "0.0.0.0")
    assert access_from_settings(settings, "127.0.0.1").keyless


def test_loopback_without_keys_serves_keyless_and_says_so(env):
    port = free_port()
    server = Serving([str(BIN / "statekeeper"), "api", "--host", "127.0.0.1", "--port", str(port)], env, port)
    try:
        server.wait_listening()
        url = f"http://127.0.0.1:{port}/conversations"
        response = httpx.get(url, timeout=30)
        assert response.status_code == 503 and "Temporal" in response.json()["detail"]  # served, not refused
        # a key created while it runs is required from the next request on: no restart
        key = _run(env, "keys", "create", "--tenant", "default", "--role", "service").stdout.strip()
        assert httpx.get(url, timeout=30).status_code == 401
        assert httpx.get(url, headers={"Authorization": "Bearer sk_bad"}, timeout=30).status_code == 401
        assert httpx.get(url, headers={"Authorization": f"Bearer {key}"}, timeout=30).status_code == 503
        # every key revoked: the loopback bind is keyless again, as at its start
        assert _run(env, "keys", "revoke", key[3:15]).exit_code == 0
        assert httpx.get(url, timeout=30).status_code == 503
    finally:
        output = server.finish()
    assert "WITHOUT authentication" in output and "loopback callers only" in " ".join(output.split())


def test_keys_are_created_listed_revoked_and_required_once_they_exist(env, tmp_path):
    created = _run(env, "keys", "create", "--tenant", "acme", "--role", "operator", "--label", "sup-desk")
    assert created.exit_code == 0, created.stderr
    key = created.stdout.strip()  # standard output holds the key alone
    assert key.startswith("sk_") and len(key) == 3 + 12 + 1 + 43
    key_id = key[3:15]
    listed = _run(env, "keys", "list")
    assert key_id in listed.stdout and "acme" in listed.stdout and "sup-desk" in listed.stdout
    assert key[16:] not in listed.stdout + listed.stderr
    with sa.create_engine(f"sqlite:///{tmp_path / 'journal.sqlite'}").connect() as conn:
        stored = " ".join(str(v) for row in conn.exec_driver_sql("SELECT * FROM api_keys") for v in row)
    assert key_id in stored and key[16:] not in stored  # a digest, never the secret
    assert oct((tmp_path / "api-key.secret").stat().st_mode & 0o777) == "0o600"
    refused = _run(env, "keys", "create", "--tenant", "acme", "--role", "operator", "--customer", "c1")
    assert refused.exit_code == 2 and "only a service key" in refused.stderr and refused.stdout == ""
    assert _run(env, "keys", "create", "--tenant", "Bad Tenant!", "--role", "service").exit_code == 2

    port = free_port()
    server = Serving([str(BIN / "statekeeper"), "api", "--host", "0.0.0.0", "--port", str(port)], env, port)
    try:
        server.wait_listening()
        url = f"http://127.0.0.1:{port}/conversations"
        assert httpx.get(url, timeout=30).status_code == 401  # loopback too: keys exist
        assert httpx.get(url, headers={"Authorization": f"Bearer {key}"}, timeout=30).status_code == 503
        assert _run(env, "keys", "revoke", key_id).exit_code == 0
        response = httpx.get(url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        assert response.status_code == 401 and "not valid" in response.json()["detail"]  # at once, no restart
    finally:
        output = server.finish()
    assert "API keys required" in output
    assert _run(env, "keys", "revoke", key_id).exit_code == 1  # already revoked
    assert key_id not in _run(env, "keys", "list").stdout and key_id in _run(env, "keys", "list", "--all").stdout


async def test_the_keyless_app_answers_loopback_callers_only(tmp_path):
    from activities.store.journal import JournalStore

    def no_temporal():
        raise RuntimeError("no Temporal server here")

    app = create_app(no_temporal, lambda: JournalStore(f"sqlite:///{tmp_path / 'j.sqlite'}"))
    for client, status in ((("203.0.113.9", 5000), 401), (("10.1.2.3", 80), 401), (("::1", 9), 503)):
        transport = httpx.ASGITransport(app=app, client=client, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as http:
            response = await http.get("/conversations/c-1")
        assert response.status_code == status, (client, response.text)
        if status == 401:
            assert response.json()["detail"] == "this API runs without keys and answers loopback callers only"


# --- Keyless loopback servers and browser pages ---

FOREIGN_HOST = "this server runs without keys and answers requests addressed to 127.0.0.1, ::1 or localhost only"
FOREIGN_PAGE = "this server runs without keys and answers pages served on this machine's loopback address only"


def _no_temporal():
    raise RuntimeError("no Temporal server here")


@pytest.fixture
def api(tmp_path):
    settings = Settings(data_dir=tmp_path)
    return create_app(_no_temporal, access=access_from_settings(settings, "127.0.0.1"))


async def _ask(app, base_url: str, method: str, path: str, origin: str | None = None) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000), raise_app_exceptions=False)
    headers = {"Origin": origin} if origin is not None else {}
    async with httpx.AsyncClient(transport=transport, base_url=base_url) as http:
        return await http.request(method, path, headers=headers)


@pytest.mark.parametrize("base_url", ["http://attacker.example:8000", "http://127.0.0.1.attacker.example",
                                      "http://10.0.0.5:8000"])
async def test_a_rebound_host_is_refused_before_anything_is_read(api, base_url):
    response = await _ask(api, base_url, "GET", "/conversations/c-1/transcript")
    assert response.status_code == 403 and response.json() == {"detail": FOREIGN_HOST}


@pytest.mark.parametrize("origin", ["http://attacker.example", "null", "http://[bad"])
async def test_a_cross_site_post_is_refused(api, origin):
    response = await _ask(api, "http://127.0.0.1:8000", "POST", "/conversations/c-1/cancel", origin)
    assert response.status_code == 403 and response.json() == {"detail": FOREIGN_PAGE}


@pytest.mark.parametrize("base_url, origin", [
    ("http://127.0.0.1:8000", None), ("http://localhost:8000", None), ("http://[::1]:8000", None),
    ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),  # the API's own /docs page
    ("http://localhost:8000", "http://localhost:8233"),
])
async def test_this_machines_own_callers_are_served(api, base_url, origin):
    response = await _ask(api, base_url, "GET", "/conversations/c-1", origin)
    assert response.status_code == 503  # past authentication: Temporal is what is missing here


async def test_the_dev_codec_server_takes_its_web_ui_and_configured_origins_only(tmp_path):
    settings = Settings(data_dir=tmp_path, ui_port=8233, codec_cors_origins="https://ui.example.com")
    from starter.runtime.codec import codec_keyring

    codec_keyring(settings, create=True)
    app = codec_app(payload_codec(settings), ["https://ui.example.com"], local_access(settings))
    body = {"payloads": []}

    async def decode(base_url: str, origin: str | None) -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
        headers = {"Origin": origin} if origin else {}
        async with httpx.AsyncClient(transport=transport, base_url=base_url) as http:
            return await http.post("/decode", content=json.dumps(body), headers=headers)

    for origin in ("http://127.0.0.1:8233", "https://ui.example.com", None):
        assert (await decode("http://127.0.0.1:8234", origin)).status_code == 200, origin
    refused = await decode("http://127.0.0.1:8234", "http://attacker.example")
    assert refused.status_code == 403 and refused.json() == {"detail": FOREIGN_PAGE}
    rebound = await decode("http://attacker.example:8234", None)
    assert rebound.status_code == 403 and rebound.json() == {"detail": FOREIGN_HOST}


# --- statekeeper keys: labels and scopes ---

ROOT = Path(__file__).resolve().parents[2]
ESCAPES = "ok\x1b]0;owned\x07\x1b[2J\x1b[31mred"


def _cli(data: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, STATEKEEPER_DATA_DIR=str(data), STATEKEEPER_DEV_STATE_FILE=str(data) + ".dev.json",
               COLUMNS="250")
    env.pop("STATEKEEPER_JOURNAL_URL", None)
    return subprocess.run([sys.executable, "-m", "starter.cli.app", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_label_with_control_characters_is_refused_and_nothing_is_created(tmp_path):
    done = _cli(tmp_path, "keys", "create", "--tenant", "t1", "--role", "service", "--label", ESCAPES)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == "" and "\x1b" not in done.stderr and "Traceback" not in done.stderr
    assert "label" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "API keys (0)" in _cli(tmp_path, "keys", "list").stdout


def test_a_label_longer_than_the_table_keeps_is_refused_not_cut(tmp_path):
    done = _cli(tmp_path, "keys", "create", "--tenant", "t1", "--role", "service", "--label", "x" * 201)
    assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)
    assert "200" in done.stderr
    assert _cli(tmp_path, "keys", "create", "--tenant", "t1", "--role", "service", "--label", "x" * 200).returncode == 0


def test_keys_list_never_passes_terminal_escapes_from_a_stored_label(tmp_path):
    tmp_path.mkdir(exist_ok=True)
    store = KeyStore(f"sqlite:///{tmp_path / 'journal.sqlite'}", "secret-for-the-test")
    try:
        record, _ = store.create("t1", Role.SERVICE, label="plain")
        with store.engine.begin() as conn:  # stored unchecked, as by hand or by an older version
            conn.execute(api_keys.update().where(api_keys.c.key_id == record.key_id).values(label=ESCAPES))
    finally:
        store.close()
    shown = _cli(tmp_path, "keys", "list")
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    assert "\\x1b" in shown.stdout  # shown escaped, as the transcript shows it


def test_a_customer_scope_that_is_no_customer_id_is_refused_and_nothing_is_created(tmp_path):
    # --customer "" (an unset shell variable) must not make a key scoped to the pseudonym of
    # the empty id, a customer that cannot exist
    for customer in ("", " ", "raj sanchez", "x" * 129, "raj\x1b[2J"):
        done = _cli(tmp_path, "keys", "create", "--tenant", "t1", "--role", "service", "--customer", customer)
        assert done.returncode == 2, (customer, done.stdout, done.stderr)
        assert done.stdout == "" and "customer id" in done.stderr and "\x1b" not in done.stderr
    assert "API keys (0)" in _cli(tmp_path, "keys", "list").stdout
    made = _cli(tmp_path, "keys", "create", "--tenant", "t1", "--role", "service", "--customer", "raj_sanchez_2970")
    assert made.returncode == 0, made.stderr


def test_a_key_is_created_with_its_own_request_rate(env):
    created = _run(env, "keys", "create", "--tenant", "acme", "--role", "service", "--requests-per-minute", "120")
    assert created.exit_code == 0, created.stderr
    key_id = created.stdout.strip()[3:15]
    row = next(line for line in _run(env, "keys", "list").stdout.splitlines() if key_id in line)
    assert "120" in row
    refused = _run(env, "keys", "create", "--tenant", "acme", "--role", "service", "--requests-per-minute", "0")
    assert refused.exit_code == 2 and refused.stdout == "" and "Traceback" not in refused.stderr
