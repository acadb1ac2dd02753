"""A closed terminal (SIGHUP) and a Ctrl-C held down through the exit, to real `statekeeper dev`
processes (the chat's hangup: ``test_cli_signals``) with a real embedded server (a helper's findings: the hangup killed them
outright and left the embedded server running in its own session; a Ctrl-C storm printed an
atexit ``KeyboardInterrupt`` traceback, or ended dev with status 130 before "stopped.")."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from starter.dev.server import reachable
from starter.dev.server_owner import stop_orphan
from tests.e2e.test_cli import _get_json
from tests.e2e.test_cli_signals import ROOT, _env, _kill_group, _start, _stopped_quietly


def test_sighup_stops_a_foreground_dev_and_its_embedded_server(tmp_path):
    env, port, api_port = _env(tmp_path, "hangup")
    dev = _start(env, "dev")
    try:
        assert _get_json(f"http://127.0.0.1:{api_port}/healthz")["status"] == "ok"
        dev.send_signal(signal.SIGHUP)
        _stopped_quietly(dev, f"127.0.0.1:{port}")  # before: killed (-1), its server left listening
    finally:
        _kill_group(dev)
        stop_orphan(tmp_path / "hangup", f"127.0.0.1:{port}")  # what a failed test left


def test_sighup_ignored_under_nohup_keeps_dev_running(tmp_path):
    env, port, api_port = _env(tmp_path, "nohup")
    dev = subprocess.Popen(["nohup", sys.executable, "-m", "starter.cli.app", "dev"], cwd=ROOT, env=env, text=True,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           start_new_session=True)
    try:
        assert _get_json(f"http://127.0.0.1:{api_port}/healthz")["status"] == "ok"
        dev.send_signal(signal.SIGHUP)
        time.sleep(2)
        assert dev.poll() is None and reachable(f"127.0.0.1:{port}")
        dev.send_signal(signal.SIGINT)
        _stopped_quietly(dev, f"127.0.0.1:{port}")
    finally:
        _kill_group(dev)


def test_a_ctrl_c_held_down_through_devs_exit_is_ignored(tmp_path):
    """SIGINT every 10 ms from the first until the process has gone."""
    env, port, api_port = _env(tmp_path, "storm")
    for _ in range(3):  # the window (the loop closed, the process not yet ended) is short
        dev = _start(env, "dev")
        try:
            assert _get_json(f"http://127.0.0.1:{api_port}/healthz")["status"] == "ok"
            while dev.poll() is None:
                dev.send_signal(signal.SIGINT)
                time.sleep(0.01)
            _stopped_quietly(dev, f"127.0.0.1:{port}")
        finally:
            _kill_group(dev)
