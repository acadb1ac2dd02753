"""`statekeeper dev` with its HTTP API's and codec server's ports taken by another program: it
says so and serves the rest (the embedded server, the worker, the Web UI). Before, uvicorn's
failed startup ended the whole command (status 3, only uvicorn's traceback in the log). Real
processes, a real embedded server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from starter.dev.server import reachable
from tests.e2e.test_cli_signals import ROOT, _env, _kill_group, _start


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
    """Only the dev's log said "external services not served"; `dev --detach` said it was
    running, and its refunds then went without the payments service."""
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
    """The embedded server cannot start without its Web UI port; before, dev said only
    "temporal dev server exited with 1; see <log>", and the reason was in that log."""
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
    """On their own, ``statekeeper api`` and ``statekeeper codec-server`` ended with uvicorn's
    status 3 and its log line alone when their port was taken. No Temporal server is needed
    to find out (the API connects on demand)."""
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
    # the address line comes once it listens: before, it was printed first, as if it served
    assert f"on http://127.0.0.1:{port}" not in done.stdout + done.stderr


@pytest.mark.parametrize("args, setting", [
    (["api", "--port", "99999"], {}), (["api", "--port", "-1"], {}), (["codec-server", "--port", "70000"], {}),
    (["api"], {"STATEKEEPER_API_PORT": "70000"}), (["codec-server"], {"STATEKEEPER_CODEC_PORT": "0"}),
    (["dev"], {"STATEKEEPER_SERVICES_PORT": "65535"}),
])
def test_a_port_outside_1_to_65535_is_refused_before_anything_starts(tmp_path, args, setting):
    """Before, a port out of range reached the socket's bind(): an OverflowError traceback
    (``api --port 99999``, ``codec-server --port 70000``), status 1."""
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
