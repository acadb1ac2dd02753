"""An embedded Temporal server whose `statekeeper dev` was killed outright (SIGKILL) is found by
the next `dev` on the same data directory, or by `statekeeper stop`, and stopped. Before, the
next `dev` used it as "a server already running" and left it running on exit, and nothing knew
of it (a helper's finding). Real processes, a real embedded server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from starter.dev.server import reachable
from tests.e2e.test_cli import _get_json
from tests.e2e.test_cli_signals import ROOT, _env, _kill_group, _start, _until


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
    """Before, `statekeeper dev` ran on with its server gone, its worker logging
    "poll_workflow_task_queue retried N times ... ConnectionRefused" for ever (a new user's report)."""
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
