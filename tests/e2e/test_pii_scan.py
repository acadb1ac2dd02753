"""No customer's personal data in plaintext outside the system of record: after the 20 dev
τ-bench tasks on a keyless loopback `statekeeper dev` (embedded
server persisted to SQLite, worker, API, codec server) with the CLI's runner, and a few
HTTP API calls that carry a customer id and an e-mail, a scan (``tests/pii_scan.py``) of the
raw histories fetched without the codec, the Temporal server's database file (history and
visibility) and the worker, API and dev-server logs finds none of those customers' e-mails,
names, street addresses or payment method ids. The same run with the codec off is the
control: the scan finds them in the histories and the database, so it can fail.

``STATEKEEPER_SCAN_CONTROL_TASKS`` sets the control's number of tasks (default 3; 20 gives
the "codec off" counts of docs/security.md)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from systems.retail import load_data
from tests.e2e.test_taubench import DEV_TASKS
from tests.ports import free_port
from tests.pii_scan import needles_for, raw_histories, scan_files, scan_histories

ROOT = Path(__file__).resolve().parents[2]


def _cli(env: dict, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "starter.cli.app", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _env(tmp_path: Path, codec: bool) -> dict:
    """A keyless loopback dev setup: no STATEKEEPER_* from the caller (no codec keys: dev
    makes its key file), every port free."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STATEKEEPER_") and k != "ANTHROPIC_API_KEY"}
    env.update(PYTHONPATH=str(ROOT), COLUMNS="200", STATEKEEPER_DATA_DIR=str(tmp_path / "data"),
               STATEKEEPER_DEV_STATE_FILE=str(tmp_path / "dev.json"),
               STATEKEEPER_TEMPORAL_ADDRESS=f"127.0.0.1:{free_port()}", STATEKEEPER_UI_PORT=str(free_port()),
               STATEKEEPER_API_PORT=str(free_port()), STATEKEEPER_CODEC_PORT=str(free_port()),
               STATEKEEPER_SERVICES_PORT=str(free_port()),
               STATEKEEPER_CODEC_ENABLED=str(codec).lower())
    return env


def _api_calls(env: dict, tmp_path: Path, user_id: str, email: str) -> Path:
    """`statekeeper api` (INFO: its access log is on) answering calls that carry a customer
    id in the query and an e-mail in a message; returns its log file."""
    port = free_port()
    log_path = tmp_path / "api.log"
    with open(log_path, "wb") as log:
        api = subprocess.Popen([sys.executable, "-m", "starter.cli.app", "api", "--port", str(port)], cwd=ROOT, env=env,
                               stdout=log, stderr=subprocess.STDOUT)
        try:
            base = f"http://127.0.0.1:{port}"
            for _ in range(200):
                try:
                    if httpx.get(f"{base}/healthz", timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
            assert httpx.get(f"{base}/conversations", params={"customer_id": user_id}, timeout=30).status_code == 200
            opened = httpx.post(f"{base}/conversations", timeout=60,
                                json={"conversation_id": "scan-api", "text": f"Hi, my email is {email}"})
            assert opened.status_code == 201, opened.text
            unknown = httpx.get(f"{base}/conversations/{email}", timeout=30)  # a careless caller's URL
            assert unknown.status_code in (404, 422)
        finally:
            api.terminate()
            api.wait(timeout=30)
    return log_path


async def _run_and_scan(tmp_path: Path, codec: bool, tasks: int) -> tuple[dict[str, Counter], Path]:
    env = _env(tmp_path, codec)
    data_dir = tmp_path / "data"
    task_file = tmp_path / "tasks.json"
    task_list = json.loads(DEV_TASKS.read_text())[:tasks]
    task_file.write_text(json.dumps(task_list))
    users = load_data()["users"]
    needles = needles_for(users, [t["user_id"] for t in task_list])
    first = users[task_list[0]["user_id"]]
    try:
        started = _cli(env, "dev", "--detach", timeout=120)
        assert started.returncode == 0, started.stdout + started.stderr
        bench = _cli(env, "taubench", "--tasks", str(task_file), "--concurrency", "8")
        (tmp_path / "taubench.log").write_text(bench.stdout + bench.stderr)
        assert bench.returncode == 0, bench.stdout[-3000:] + bench.stderr[-3000:]
        api_log = _api_calls(env, tmp_path, task_list[0]["user_id"], first["email"])
        histories = await raw_histories(env["STATEKEEPER_TEMPORAL_ADDRESS"])
    finally:
        stopped = _cli(env, "stop", timeout=60)
    assert "stopped" in stopped.stdout
    assert len(histories) >= 2 * tasks  # conversations and their refund workflows
    database = [data_dir / f"temporal.sqlite{suffix}" for suffix in ("", "-wal", "-shm")]
    assert database[0].stat().st_size > 0
    logs = [data_dir / "dev.log", data_dir / "temporal-server.log", api_log, tmp_path / "taubench.log"]
    counts = {"histories": scan_histories(histories, needles), "database": scan_files(database, needles, text=False),
              "logs": scan_files(logs, needles, text=True)}
    print(f"\nPII scan, codec {'on' if codec else 'off'}, {tasks} tasks, {len(histories)} runs:",
          {where: dict(c) for where, c in counts.items()})
    return counts, data_dir


async def test_after_the_dev_tasks_no_personal_data_is_in_plaintext_outside_the_system_of_record(tmp_path):
    counts, data_dir = await _run_and_scan(tmp_path, codec=True, tasks=20)
    assert {where: +c for where, c in counts.items()} == {"histories": Counter(), "database": Counter(),
                                                          "logs": Counter()}
    # every file the processes made in the data directory is private
    modes = {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in data_dir.iterdir() if p.is_file()}
    assert {"codec.keys", "statekeeper.sqlite", "journal.sqlite", "temporal.sqlite", "dev.log"} <= set(modes)
    assert {name: mode for name, mode in modes.items() if mode != "0o600"} == {}


@pytest.mark.parametrize("tasks", [int(os.environ.get("STATEKEEPER_SCAN_CONTROL_TASKS", "3"))])
async def test_the_scan_finds_personal_data_when_the_codec_is_off(tmp_path, tasks):
    counts, data_dir = await _run_and_scan(tmp_path, codec=False, tasks=tasks)
    for where in ("histories", "database"):
        for kind in ("email", "name", "address", "payment method id"):
            assert counts[where][kind] > 0, (where, kind, counts)
    assert not (data_dir / "codec.keys").exists()  # off means off: no key made
