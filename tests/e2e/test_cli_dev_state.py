"""The detached dev server found from any directory (issue 6, item 6): `dev --detach` records
its settings (absolute data directory) in the dev state file; `chat`, `state`, `dev --detach`
and `stop` started in another directory use that system of record instead of seeding a new
one, and a worker for another database refuses the queue. Real processes, real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import sqlalchemy as sa

from activities.store.migrate import current_revision, head_revision
from starter.dev.server import reachable
from tests.e2e.test_taubench import _free_port
from tests.policy_fixtures import EMAIL, PENDING

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
    port, ui_port, api_port = _free_port(), _free_port(), _free_port()
    state_file = tmp_path / "state" / "dev.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STATEKEEPER_") and k != "ANTHROPIC_API_KEY"}
    env.update(PYTHONPATH=str(ROOT), COLUMNS="300", STATEKEEPER_TEMPORAL_ADDRESS=f"127.0.0.1:{port}",
               STATEKEEPER_DEV_STATE_FILE=str(state_file),
               STATEKEEPER_APPROVAL_THRESHOLD="100000")  # the cancel (826.70) needs no supervisor here
    started_env = dict(env, STATEKEEPER_UI_PORT=str(ui_port), STATEKEEPER_TASK_QUEUE="sor-queue",
                       STATEKEEPER_API_PORT=str(api_port), STATEKEEPER_CODEC_PORT=str(_free_port()))
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
                       STATEKEEPER_TASK_QUEUE="sor-queue", STATEKEEPER_API_PORT=str(_free_port()))
        clash = _cli(elsewhere, unaware, "dev", "--detach")
        assert clash.returncode == 2, _flat(clash)
        assert "another system of record" in _flat(clash) and "Traceback" not in clash.stderr
        # and says the server was not its own, and how to run one's own beside it (on a shared
        # machine another user's dev on the default ports looked like a misconfiguration)
        assert f"The Temporal server at 127.0.0.1:{port} was already running" in _flat(clash)
        assert "STATEKEEPER_TEMPORAL_ADDRESS, STATEKEEPER_UI_PORT" in _flat(clash)
        assert not (tmp_path / "other-state.json").exists()

        # on another task queue it runs beside it, and says the server is not its own: it printed
        # the Web UI URL of its own settings, where no server serves one
        beside = dict(unaware, STATEKEEPER_TASK_QUEUE="beside-queue", STATEKEEPER_DATA_DIR=str(tmp_path / "beside"),
                      STATEKEEPER_CODEC_PORT=str(_free_port()), STATEKEEPER_SERVICES_PORT=str(_free_port()))
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
    """A new user ran `statekeeper dev` in one terminal and `chat` in another, as docs/index.md
    walks through: the chat was refused ("served by a worker configured with other external
    services"), because only `dev --detach` recorded its settings. The foreground one records
    them too now, and `stop` stops it."""
    here, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    port = _free_port()
    state_file = tmp_path / "state" / "dev.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STATEKEEPER_") and k != "ANTHROPIC_API_KEY"}
    env.update(PYTHONPATH=str(ROOT), COLUMNS="300", STATEKEEPER_TEMPORAL_ADDRESS=f"127.0.0.1:{port}",
               STATEKEEPER_DEV_STATE_FILE=str(state_file), STATEKEEPER_APPROVAL_THRESHOLD="100000")
    dev_env = dict(env, STATEKEEPER_UI_PORT=str(_free_port()), STATEKEEPER_API_PORT=str(_free_port()),
                   STATEKEEPER_CODEC_PORT=str(_free_port()), STATEKEEPER_SERVICES_PORT=str(_free_port()))
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
