"""Commands started with no Temporal server at the configured address, or with an invalid
setting, as real processes:
each says what is wrong and how to fix it, exits 2 (1 for the healthcheck), and shows no
traceback, exception name or transport-library text (README follower: `statekeeper worker`
printed a rich traceback with ``tonic::transport::Error``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
LEAKS = ("Traceback", "tonic", "RuntimeError", "StartupRefused", "TemporalUnreachable", "Error(")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """Its own data directory and codec key; a Temporal address nothing listens on."""
    return {**os.environ, "STATEKEEPER_DATA_DIR": str(tmp_path), "STATEKEEPER_DEV_STATE_FILE": str(tmp_path / "dev.json"),
            "STATEKEEPER_TEMPORAL_ADDRESS": f"127.0.0.1:{_free_port()}", "NO_COLOR": "1", "COLUMNS": "200"}


@pytest.mark.parametrize("command, status", [(["worker"], 2), (["worker-health"], 1)])
def test_no_server_is_a_plain_message(env, command, status):
    done = subprocess.run([str(BIN / "statekeeper"), *command], env=env, capture_output=True, text=True, timeout=60)
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == status, output
    assert f"Temporal is not reachable at {env['STATEKEEPER_TEMPORAL_ADDRESS']}" in output
    assert "STATEKEEPER_TEMPORAL_ADDRESS" in output
    assert not [leak for leak in LEAKS if leak in output], output


def test_a_certificate_without_its_key_is_named_by_the_healthcheck(env, tmp_path):
    cert = tmp_path / "client.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\n")
    done = subprocess.run([str(BIN / "statekeeper"), "worker-health"], capture_output=True, text=True, timeout=60,
                          env={**env, "STATEKEEPER_TEMPORAL_TLS_CLIENT_CERT": str(cert)})
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1 and "STATEKEEPER_TEMPORAL_TLS_CLIENT_KEY" in output, output
    assert "not reachable" not in output and not [leak for leak in LEAKS if leak in output], output


@pytest.mark.parametrize("command", [["api", "--port", "1"], ["worker"], ["state", "c-1"]])
def test_an_invalid_setting_is_one_line_naming_it(env, command):
    done = subprocess.run([str(BIN / "statekeeper"), *command], capture_output=True, text=True, timeout=60,
                          env={**env, "STATEKEEPER_TOKEN_BUDGET": "0"})
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2 and "invalid setting: STATEKEEPER_TOKEN_BUDGET" in output, output
    assert "Traceback" not in output and "ValidationError" not in output and "pydantic" not in output, output
    assert done.stdout == ""  # said on stderr: `statekeeper state ID > state.json` leaves no message in the file


@pytest.mark.parametrize("command, value", [
    *((command, value) for command in (["api"], ["codec-server"]) for value in ("", "abc", "id:not-base64")),
    (["worker"], "abc"), (["state", "c-1"], "id:not-base64"), (["chat"], ""),
])
def test_unusable_codec_keys_are_an_invalid_setting_naming_the_shape(env, command, value):
    """Set but empty or malformed, STATEKEEPER_CODEC_KEYS ended these commands with a
    ``CodecKeyError`` traceback; ``chat`` and ``state`` first started an embedded server."""
    done = subprocess.run([str(BIN / "statekeeper"), *command], capture_output=True, text=True, timeout=60,
                          env={**env, "STATEKEEPER_CODEC_KEYS": value}, stdin=subprocess.DEVNULL)
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, output
    assert "invalid setting: STATEKEEPER_CODEC_KEYS: " in output and "expected `id:base64key,...`" in output, output
    assert not [leak for leak in (*LEAKS, "CodecKey") if leak in output], output
    assert done.stdout == ""  # said on stderr (the worker's in its log)
    assert not (Path(env["STATEKEEPER_DATA_DIR"]) / "temporal.sqlite").exists()  # nothing started for nothing
