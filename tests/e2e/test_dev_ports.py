"""`statekeeper dev` with its HTTP API's and codec server's ports taken by another program: it
says so and serves the rest (the embedded server, the worker, the Web UI). Before, uvicorn's
failed startup ended the whole command (status 3, only uvicorn's traceback in the log). Real
processes, a real embedded server."""

from __future__ import annotations

import signal
import socket
import subprocess
import time

from starter.devserver import reachable
from tests.e2e.test_cli_signals import _env, _kill_group, _start


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
        assert f"HTTP API not served (the API could not listen on 127.0.0.1:{api_port}" in flat
        assert f"codec server not served (the codec server could not listen on 127.0.0.1:{codec_port}" in flat
        assert reachable(f"127.0.0.1:{port}")  # the embedded server and its worker go on
        dev.send_signal(signal.SIGTERM)
        rest, _ = dev.communicate(timeout=60)
        assert dev.returncode == 0, said + rest
        assert not reachable(f"127.0.0.1:{port}")
    finally:
        _kill_group(dev)
        api.close()
        codec.close()
