"""``statekeeper dev`` as a user runs it, real processes with a real embedded server:

- the detached dev server is found from any directory: ``dev --detach`` records its settings
  (absolute data directory) in the dev state file; ``chat``, ``state``, ``dev --detach`` and
  ``stop`` started in another directory use that system of record instead of seeding a new one,
  and a worker for another database refuses the queue;
- with its HTTP API's, codec server's, services' or Web UI's port taken by another program it
  says which and serves the rest (the embedded server, the worker, the Web UI); a port outside
  1 to 65535 is refused before anything starts;
- an embedded Temporal server whose ``dev`` was killed outright (SIGKILL) is found by the next
  ``dev`` on the same data directory, or by ``statekeeper stop``, and stopped; ``dev`` stops when
  its embedded server dies;
- the HTTP API ``dev`` serves checks an operator's resolution against the external services it
  serves too (it has their URLs): a cancel whose money never moved (the payments service
  answering 503 to every attempt, the step escalated as unknown) cannot be resolved ``applied``
  over HTTP, as ``statekeeper resolve`` refuses it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from activities.store.migrate import current_revision, head_revision
from starter.dev.server import reachable
from tests.e2e.test_cli import _get_json
from tests.e2e.test_cli_signals import _env, _kill_group, _start, _until
from tests.ports import free_port
from tests.policy_fixtures import EMAIL, PENDING


# --- The detached dev server from any directory ---

ROOT = Path(__file__).resolve().parents[2]


def _cli(cwd: Path, env: dict, *args: str, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "starter.cli.app", *args], cwd=cwd, env=env, input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def _flat(done: subprocess.CompletedProcess) -> str:
    return " ".join((done.stdout + done.stderr).split())  # rich wraps long lines


def test_commands_from_another_directory_use_the_detached_dev_servers_data(tmp_path):
    here, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    port, ui_port, api_port = free_port(), free_port(), free_port()
    state_file = tmp_path / "state" / "dev.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STATEKEEPER_") and k != "ANTHROPIC_API_KEY"}
    env.update(PYTHONPATH=str(ROOT), COLUMNS="300", STATEKEEPER_TEMPORAL_ADDRESS=f"127.0.0.1:{port}",
               STATEKEEPER_DEV_STATE_FILE=str(state_file),
               STATEKEEPER_APPROVAL_THRESHOLD="100000")  # the cancel (826.70) needs no supervisor here
    started_env = dict(env, STATEKEEPER_UI_PORT=str(ui_port), STATEKEEPER_TASK_QUEUE="sor-queue",
                       STATEKEEPER_API_PORT=str(api_port), STATEKEEPER_CODEC_PORT=str(free_port()))
    try:
        started = _cli(here, started_env, "dev", "--detach")  # default data dir: relative .statekeeper
        assert started.returncode == 0, _flat(started)
        record = json.loads(state_file.read_text())
        data_dir = here / ".statekeeper"
        assert record["data_dir"] == str(data_dir.resolve())  # absolute, whatever the cwd later
        assert record["temporal_address"] == f"127.0.0.1:{port}" and record["ui_port"] == ui_port
        assert record["api_url"] == f"http://127.0.0.1:{api_port}"
        assert record["task_queue"] == "sor-queue" and len(record["db_fingerprint"]) == 16
        assert "sqlite" not in state_file.read_text()  # the database only as its fingerprint

        # from another directory, with neither the data dir nor the task queue given
        script = f"Hi, my email is {EMAIL}\nPlease cancel order {PENDING}, I ordered it by mistake\nyes\nquit\n"
        chat = _cli(elsewhere, env, "chat", "--conversation-id", "sor-chat", stdin=script)
        assert chat.returncode == 0, _flat(chat)
        assert "cancelled" in chat.stdout and f"{ui_port}" in chat.stdout  # its queue and Web UI port
        shown = _cli(elsewhere, env, "state", "sor-chat")
        assert shown.returncode == 0, _flat(shown)
        assert [op["tool"] for op in json.loads(shown.stdout)["completed_operations"]] == ["cancel_pending_order"]
        assert list(elsewhere.iterdir()) == []  # no second system of record seeded here
        assert (data_dir / "statekeeper.sqlite").exists()
        # dev migrated statekeeper's own database (Alembic) to the newest revision
        journal = sa.create_engine(f"sqlite:///{data_dir / 'journal.sqlite'}")
        try:
            assert current_revision(journal) == head_revision()
        finally:
            journal.dispose()

        # the write landed in the dev server's database: a second chat finds the order cancelled
        again = _cli(elsewhere, env, "chat", "--conversation-id", "sor-chat-2",
                     stdin=f"Hi, my email is {EMAIL}\nPlease cancel order {PENDING}, I ordered it by mistake\nquit\n")
        assert again.returncode == 0, _flat(again)
        assert "Please confirm" not in again.stdout

        # a worker for another database on that queue refuses, and says how to fix it
        # (with the deployment's codec key: without one it would refuse for that reason first)
        keys = (data_dir / "codec.keys").read_text()
        refused = _cli(elsewhere, dict(env, STATEKEEPER_DATA_DIR=str(elsewhere / "mine"), STATEKEEPER_CODEC_KEYS=keys),
                       "worker")
        message = _flat(refused)
        assert refused.returncode == 2, message
        assert "task queue 'sor-queue' is served by a worker of another system of record" in message
        assert "STATEKEEPER_DATA_DIR" in message and "Traceback" not in message
        assert not (elsewhere / "mine" / "statekeeper.sqlite").exists()

        # a background dev that would serve the queue with another database stops, and says why
        unaware = dict(env, STATEKEEPER_DEV_STATE_FILE=str(tmp_path / "other-state.json"),
                       STATEKEEPER_TASK_QUEUE="sor-queue", STATEKEEPER_API_PORT=str(free_port()))
        clash = _cli(elsewhere, unaware, "dev", "--detach")
        assert clash.returncode == 2, _flat(clash)
        assert "another system of record" in _flat(clash) and "Traceback" not in clash.stderr
        # and says the server is not its own, and how to run one's own beside it (on a shared
        # machine another user's dev on the default ports would look like a misconfiguration)
        assert f"The Temporal server at 127.0.0.1:{port} was already running" in _flat(clash)
        assert "STATEKEEPER_TEMPORAL_ADDRESS, STATEKEEPER_UI_PORT" in _flat(clash)
        assert not (tmp_path / "other-state.json").exists()

        # on another task queue it runs beside it, and says the server is not its own (the Web UI
        # URL of its own settings would be one no server serves)
        beside = dict(unaware, STATEKEEPER_TASK_QUEUE="beside-queue", STATEKEEPER_DATA_DIR=str(tmp_path / "beside"),
                      STATEKEEPER_CODEC_PORT=str(free_port()), STATEKEEPER_SERVICES_PORT=str(free_port()))
        alongside = _cli(elsewhere, beside, "dev", "--detach")
        try:
            assert alongside.returncode == 0, _flat(alongside)
            assert (f"Web UI that server's (this dev uses the Temporal server already running at 127.0.0.1:{port}, "
                    "which it did not start)") in _flat(alongside)
            assert json.loads((tmp_path / "other-state.json").read_text())["started_server"] is False
        finally:
            assert "stopped" in _cli(elsewhere, beside, "stop").stdout
        assert reachable(f"127.0.0.1:{port}")  # not its server: still serving

        # `dev --detach` from elsewhere finds the running one instead of starting another
        second = _cli(elsewhere, env, "dev", "--detach")
        assert second.returncode == 0, _flat(second)
        assert f"pid {record['pid']}" in _flat(second) and str(data_dir.resolve()) in _flat(second)
    finally:
        stopped = _cli(elsewhere, env, "stop")
    assert "stopped" in stopped.stdout, _flat(stopped)
    assert not reachable(f"127.0.0.1:{port}")
    assert not state_file.exists()
    assert "no background" in _cli(elsewhere, env, "stop").stdout


def test_a_chat_beside_a_foreground_dev_uses_its_services_and_stop_stops_it(tmp_path):
    """`statekeeper dev` in one terminal and `chat` in another, as docs/index.md walks through:
    the foreground dev records its settings as `dev --detach` does, so the chat uses its
    services (not refused as "served by a worker configured with other external services"),
    and `stop` stops it."""
    here, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    port = free_port()
    state_file = tmp_path / "state" / "dev.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STATEKEEPER_") and k != "ANTHROPIC_API_KEY"}
    env.update(PYTHONPATH=str(ROOT), COLUMNS="300", STATEKEEPER_TEMPORAL_ADDRESS=f"127.0.0.1:{port}",
               STATEKEEPER_DEV_STATE_FILE=str(state_file), STATEKEEPER_APPROVAL_THRESHOLD="100000")
    dev_env = dict(env, STATEKEEPER_UI_PORT=str(free_port()), STATEKEEPER_API_PORT=str(free_port()),
                   STATEKEEPER_CODEC_PORT=str(free_port()), STATEKEEPER_SERVICES_PORT=str(free_port()))
    dev = subprocess.Popen([sys.executable, "-m", "starter.cli.app", "dev"], cwd=here, env=dev_env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while not state_file.exists() and dev.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        record = json.loads(state_file.read_text())
        assert record["pid"] == dev.pid and record["detached"] is False and record["payments_url"]

        script = f"Hi, my email is {EMAIL}\nPlease cancel order {PENDING}, I ordered it by mistake\nyes\nquit\n"
        chat = _cli(elsewhere, env, "chat", "--conversation-id", "beside-fg", stdin=script)
        assert chat.returncode == 0, _flat(chat)
        assert "cancelled" in chat.stdout and "other external services" not in _flat(chat)

        second = _cli(elsewhere, env, "dev", "--detach")  # not "running in the background (pid ...)"
        assert second.returncode == 2 and "already runs in the foreground" in _flat(second), _flat(second)

        stopped = _cli(elsewhere, env, "stop")
        assert "stopped" in stopped.stdout, _flat(stopped)
        said, _ = dev.communicate(timeout=30)
        assert dev.returncode == 0 and "Traceback" not in said, said
        assert not reachable(f"127.0.0.1:{port}") and not state_file.exists()
    finally:
        if dev.poll() is None:
            os.killpg(dev.pid, 9)
            dev.wait(timeout=30)


# --- Ports taken by another program ---

def _listener() -> tuple[socket.socket, int]:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    return held, held.getsockname()[1]


def test_dev_serves_the_rest_when_its_api_and_codec_ports_are_taken(tmp_path):
    env, port, _ = _env(tmp_path, "ports")
    api, api_port = _listener()
    codec, codec_port = _listener()
    env.update(STATEKEEPER_API_PORT=str(api_port), STATEKEEPER_CODEC_PORT=str(codec_port))
    dev = _start(env, "dev")
    try:
        deadline, said = time.monotonic() + 90, ""
        while "Ctrl-C to stop." not in said and time.monotonic() < deadline and dev.poll() is None:
            said += dev.stdout.readline()
        flat = " ".join(said.split())
        assert "Ctrl-C to stop." in flat, said
        # each says why: two servers starting at once keep their own bind error
        assert f"HTTP API not served (the API could not listen on 127.0.0.1:{api_port}: the port is taken" in flat
        assert (f"codec server not served (the codec server could not listen on 127.0.0.1:{codec_port}: "
                "the port is taken") in flat
        assert reachable(f"127.0.0.1:{port}")  # the embedded server and its worker go on
        dev.send_signal(signal.SIGTERM)
        rest, _ = dev.communicate(timeout=60)
        assert dev.returncode == 0, said + rest
        assert not reachable(f"127.0.0.1:{port}")
    finally:
        _kill_group(dev)
        api.close()
        codec.close()


def test_a_detached_dev_says_its_external_services_are_not_served_when_their_port_is_taken(tmp_path):
    """`dev --detach` itself says "external services not served", not only the dev's log
    (refunds would otherwise go without the payments service unnoticed)."""
    env, port, _ = _env(tmp_path, "services")
    held, services_port = _listener()
    env.update(STATEKEEPER_SERVICES_PORT=str(services_port))
    try:
        done = subprocess.run([sys.executable, "-m", "starter.cli.app", "dev", "--detach"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        said = " ".join(done.stdout.split())
        assert done.returncode == 0, done.stdout + done.stderr
        assert ("external services (payments, email, ticketing) not served (port taken: set "
                "STATEKEEPER_SERVICES_PORT; see the log)") in said, said
        assert reachable(f"127.0.0.1:{port}")  # the rest serves
    finally:
        stopped = subprocess.run([sys.executable, "-m", "starter.cli.app", "stop"], cwd=ROOT, env=env,
                                 capture_output=True, text=True, timeout=120)
        held.close()
    assert "stopped" in stopped.stdout, stopped.stdout + stopped.stderr
    assert not reachable(f"127.0.0.1:{port}")


def test_dev_says_which_port_when_its_web_ui_port_is_taken(tmp_path):
    """The embedded server cannot start without its Web UI port; dev names the port, not only
    "temporal dev server exited with 1; see <log>" with the reason in that log."""
    env, port, _ = _env(tmp_path, "ui")
    held, ui_port = _listener()
    env.update(STATEKEEPER_UI_PORT=str(ui_port))
    try:
        done = subprocess.run([sys.executable, "-m", "starter.cli.app", "dev"], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120)
    finally:
        held.close()
    said = " ".join(done.stderr.split())
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"temporal dev server exited with 1: Error: can't set UI port {ui_port}" in said, said
    assert "address already in use" in said and "set STATEKEEPER_UI_PORT to a free one" in said, said
    assert "Traceback" not in done.stderr and not reachable(f"127.0.0.1:{port}")


@pytest.mark.parametrize("command, what", [("api", "HTTP API"), ("codec-server", "codec server")])
def test_api_and_codec_server_commands_say_their_port_is_taken(tmp_path, command, what):
    """On their own, ``statekeeper api`` and ``statekeeper codec-server`` say which port is taken
    in one line, status 1 (not uvicorn's status 3 and its log line). No Temporal server is
    needed to find out (the API connects on demand)."""
    held, port = _listener()
    env = dict(os.environ, STATEKEEPER_DATA_DIR=str(tmp_path), STATEKEEPER_DEV_STATE_FILE=str(tmp_path / "none.json"),
               STATEKEEPER_TEMPORAL_ADDRESS="127.0.0.1:1", COLUMNS="300")
    try:
        done = subprocess.run([sys.executable, "-m", "starter.cli.app", command, "--port", str(port)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60)
    finally:
        held.close()
    assert done.returncode == 1, done.stdout + done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("statekeeper:")]
    assert said == [f"statekeeper: cannot serve the {what} on 127.0.0.1:{port}: the port is taken"], done.stderr
    assert "Traceback" not in done.stderr and "SystemExit" not in done.stderr
    # the address line comes once it listens, never first as if it served
    assert f"on http://127.0.0.1:{port}" not in done.stdout + done.stderr


@pytest.mark.parametrize("args, setting", [
    (["api", "--port", "99999"], {}), (["api", "--port", "-1"], {}), (["codec-server", "--port", "70000"], {}),
    (["api"], {"STATEKEEPER_API_PORT": "70000"}), (["codec-server"], {"STATEKEEPER_CODEC_PORT": "0"}),
    (["dev"], {"STATEKEEPER_SERVICES_PORT": "65535"}),
])
def test_a_port_outside_1_to_65535_is_refused_before_anything_starts(tmp_path, args, setting):
    """A port out of range never reaches the socket's bind(), whose OverflowError traceback
    (``api --port 99999``, ``codec-server --port 70000``) would end the command with status 1."""
    env = dict(os.environ, STATEKEEPER_DATA_DIR=str(tmp_path), STATEKEEPER_DEV_STATE_FILE=str(tmp_path / "none.json"),
               STATEKEEPER_TEMPORAL_ADDRESS="127.0.0.1:1", COLUMNS="300", **setting)
    done = subprocess.run([sys.executable, "-m", "starter.cli.app", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "OverflowError" not in done.stderr
    if setting:
        assert f"invalid setting: {next(iter(setting))}" in done.stderr.replace("\n", " "), done.stderr
    else:
        assert "Invalid value for '--port'" in done.stderr, done.stderr
    assert not list(tmp_path.glob("*.sqlite")) and not (tmp_path / "none.json").exists()  # nothing started


# --- An orphaned embedded server ---

def test_a_killed_devs_server_is_stopped_by_the_next_dev_and_by_stop(tmp_path):
    env, port, api_port = _env(tmp_path, "orphan")
    address = f"127.0.0.1:{port}"
    first = _start(env, "dev")
    second = None
    try:
        assert _get_json(f"http://127.0.0.1:{api_port}/healthz")["status"] == "ok"
        os.kill(first.pid, signal.SIGKILL)  # no finally runs: its server keeps running
        first.wait(timeout=30)
        assert reachable(address)

        second = _start(env, "dev")
        banner = second.stdout.readline()  # its first line: the warning about the server it stopped
        assert "a killed statekeeper process left running" in banner, banner
        assert _get_json(f"http://127.0.0.1:{api_port}/healthz")["status"] == "ok"
        second.send_signal(signal.SIGTERM)
        said, _ = second.communicate(timeout=60)
        assert second.returncode == 0, said
        assert "using the server already running" not in said and "Traceback" not in said, said
        assert _until(lambda: not reachable(address), 15)  # it stopped the server it started

        third = _start(env, "dev")
        assert _get_json(f"http://127.0.0.1:{api_port}/healthz")["status"] == "ok"
        os.kill(third.pid, signal.SIGKILL)
        third.wait(timeout=30)
        assert reachable(address)
        stopped = subprocess.run([sys.executable, "-m", "starter.cli.app", "stop"], cwd=ROOT, env=env,
                                 capture_output=True, text=True, timeout=60)
        assert stopped.returncode == 0 and "left running" in " ".join(stopped.stdout.split()), stopped.stdout
        assert _until(lambda: not reachable(address), 15)
    finally:
        for proc in (first, second):
            if proc is not None:
                _kill_group(proc)
        from starter.dev.server_owner import stop_orphan  # what a failed test left
        stop_orphan(tmp_path / "orphan", address)


def test_dev_stops_when_its_embedded_server_dies(tmp_path):
    """`statekeeper dev` does not run on with its server gone, its worker logging
    "poll_workflow_task_queue retried N times ... ConnectionRefused" for ever."""
    import json  # noqa: PLC0415

    from starter.dev.server_owner import RECORD  # noqa: PLC0415

    env, port, api_port = _env(tmp_path, "dies")
    dev = _start(env, "dev")
    try:
        assert _get_json(f"http://127.0.0.1:{api_port}/healthz")["status"] == "ok"
        server = json.loads((tmp_path / "dies" / RECORD).read_text())["server_pid"]
        os.kill(server, signal.SIGKILL)
        said, _ = dev.communicate(timeout=60)
        flat = " ".join(said.split())
        assert dev.returncode == 2, said
        assert "the embedded Temporal server at" in flat and "statekeeper dev stops too" in flat, said
        assert "Traceback" not in said, said
    finally:
        _kill_group(dev)


# --- The dev API checks resolutions against its services ---

def _cli_beside(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "starter.cli.app", *args], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=120)


def _healthy(http: httpx.Client, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if http.get("/healthz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("the dev's API never became healthy")


def test_the_dev_api_refuses_an_applied_resolution_for_money_that_never_moved(tmp_path):
    env, _, api_port = _env(tmp_path, "resolve")
    env["STATEKEEPER_APPROVAL_THRESHOLD"] = "100000"  # the cancel (826.70) needs no supervisor
    payments = f"http://127.0.0.1:{env['STATEKEEPER_SERVICES_PORT']}"
    try:
        started = _cli_beside(env, "dev", "--detach")
        assert started.returncode == 0, started.stdout + started.stderr
        with httpx.Client(base_url=f"http://127.0.0.1:{api_port}", timeout=120) as http:
            _healthy(http)
            # every payment attempt answers 503: the retail write applies, the money's fate is unknown
            assert httpx.post(f"{payments}/_faults", json={"kind": "http_5xx", "count": 100}).status_code == 204
            cid = "dev-unmoved"
            assert http.post("/conversations", json={"conversation_id": cid,
                                                     "text": f"Hi, my email is {EMAIL}"}).status_code == 201
            shown = http.post(f"/conversations/{cid}/messages",
                              json={"text": f"Please cancel order {PENDING}, I ordered it by mistake"})
            assert shown.json()["awaiting_confirmation"], shown.text
            assert http.post(f"/conversations/{cid}/messages", json={"text": "yes"}).json()["status"] == "escalated"
            [step] = [s for s in http.get(f"/conversations/{cid}").json()["steps"] if s["status"] == "unknown"]

            refused = http.post(f"/conversations/{cid}/resolutions", json={
                "step_id": step["step_id"], "outcome": "applied", "operator": "op-1", "note": "checked the order"})
            assert refused.status_code == 409, refused.text
            assert "the money has not moved" in refused.json()["detail"]
            state = http.get(f"/conversations/{cid}").json()
            assert state["status"] == "escalated" and state["resolutions"] == []
    finally:
        _cli_beside(env, "stop")
