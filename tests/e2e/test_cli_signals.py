"""Signals to the `statekeeper` CLI as a user or a supervisor sends them: Ctrl-C at the chat
prompt ends the chat at once, and SIGTERM (``kill``, ``docker stop``, systemd) to a
foreground `statekeeper dev` stops the embedded Temporal server it started, as Ctrl-C does.
Real processes, a real embedded server; found by a helper trying to break the CLI's exit."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from starter.dev.server import reachable
from starter.dev.server_owner import stop_orphan
from tests.e2e.test_cli import _get_json
from tests.e2e.test_taubench import _free_port

ROOT = Path(__file__).resolve().parents[2]


def _start(env: dict, *args: str, stderr: int = subprocess.STDOUT) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "starter.cli.app", *args], cwd=ROOT, env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                            start_new_session=True)  # a signal to the process only, not to its group


def _kill_group(proc: subprocess.Popen) -> None:
    """Whatever of ``proc``'s process group is left (its embedded server when the test failed)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def _env(tmp_path: Path, name: str) -> tuple[dict, int, int]:
    port, api_port = _free_port(), _free_port()
    env = dict(os.environ, STATEKEEPER_TEMPORAL_ADDRESS=f"127.0.0.1:{port}", STATEKEEPER_UI_PORT=str(_free_port()),
               STATEKEEPER_API_PORT=str(api_port), STATEKEEPER_SERVICES_PORT=str(_free_port()),
               STATEKEEPER_CODEC_PORT=str(_free_port()),
               STATEKEEPER_DATA_DIR=str(tmp_path / name), STATEKEEPER_DEV_STATE_FILE=str(tmp_path / f"{name}.json"),
               COLUMNS="300")
    env.pop("ANTHROPIC_API_KEY", None)
    return env, port, api_port


def _until_reachable(address: str, seconds: float = 60, step: float = 0.1) -> None:
    deadline = time.monotonic() + seconds
    while not reachable(address) and time.monotonic() < deadline:
        time.sleep(step)


def _until(condition, seconds: float = 15, step: float = 0.1) -> bool:
    """Whether ``condition()`` holds within ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(step)
    return condition()


def _stopped_quietly(proc: subprocess.Popen, address: str) -> str:
    """``proc``'s output once it ended with status 0, "stopped." last, no traceback or error
    named, and nothing left listening at ``address``."""
    said, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, said
    assert said.split()[-1:] == ["stopped."], said
    assert "Traceback" not in said and "Error" not in said, said
    assert not reachable(address)
    return said


def test_ctrl_c_at_the_chat_prompt_ends_the_chat_at_once(tmp_path):
    env, port, _ = _env(tmp_path, "chat")
    chat = _start(env, "chat", "--conversation-id", "signals")  # starts its own embedded server and worker
    try:
        first = chat.stdout.readline()
        assert "Type 'quit' to leave" in first, first  # the conversation started
        time.sleep(1.0)  # at the prompt: its input thread is blocked on stdin, held open
        chat.send_signal(signal.SIGINT)
        rest, _ = chat.communicate(timeout=30)  # before: it waited for Enter for ever
        assert chat.returncode == 0 and "stopped." in rest
        assert not reachable(f"127.0.0.1:{port}")  # its embedded server stopped with it
    finally:
        _kill_group(chat)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_a_hangup_at_the_chat_prompt_stops_its_embedded_server(tmp_path, sig):
    """Before: status -15 (SIGTERM) or -1 (SIGHUP: a closed terminal), the embedded server left running."""
    env, port, _ = _env(tmp_path, f"chat-{sig.name.lower()}")
    chat = _start(env, "chat", "--conversation-id", "terminated")
    try:
        first = chat.stdout.readline()
        assert "Type 'quit' to leave" in first, first
        chat.send_signal(sig)
        rest, _ = chat.communicate(timeout=30)
        assert chat.returncode == 0 and "stopped." in rest, rest
        assert _until(lambda: not reachable(f"127.0.0.1:{port}"))
    finally:
        _kill_group(chat)
        stop_orphan(tmp_path / f"chat-{sig.name.lower()}", f"127.0.0.1:{port}")  # what a failed test left


def _silent_model() -> tuple[socket.socket, list]:
    """A model endpoint that accepts connections and never answers: a reply waits for it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    calls: list = []

    def accept() -> None:
        while True:
            try:
                calls.append(listener.accept())  # held open, never answered
            except OSError:  # closed at the end of the test
                return

    threading.Thread(target=accept, daemon=True).start()
    return listener, calls


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_while_chat_waits_for_a_reply_says_stopped_and_nothing_else(tmp_path, sig):
    """Before, it also printed asyncio's "Task exception was never retrieved" with the SDK's
    WorkflowUpdateRPCTimeoutOrCancelledError traceback: the task ``asyncio.wait_for`` made for
    the update's result ended with that error when cancelled, and nobody read it."""
    env, port, _ = _env(tmp_path, f"chat-wait-{sig.name}")
    model, calls = _silent_model()
    env.update(ANTHROPIC_API_KEY="sk-ant-test-not-a-key",
               STATEKEEPER_ANTHROPIC_BASE_URL=f"http://127.0.0.1:{model.getsockname()[1]}")
    chat = _start(env, "chat", "--conversation-id", f"waiting-{sig.name.lower()}", stderr=subprocess.PIPE)
    try:
        first = chat.stdout.readline()
        if not first:  # chat ended before its banner (seen once in CI, SIGTERM case): say why
            chat.wait(timeout=30)
            pytest.fail(f"chat ended before its banner, status {chat.returncode}: {chat.stderr.read()}")
        assert "Type 'quit' to leave" in first, first
        chat.stdin.write("where is my order?\n")
        chat.stdin.flush()
        deadline = time.monotonic() + 60
        while not calls and time.monotonic() < deadline and chat.poll() is None:
            time.sleep(0.1)
        assert calls, "the model was never called"
        time.sleep(0.5)  # the chat waits for the update's result
        chat.send_signal(sig)
        out, err = chat.communicate(timeout=60)
        assert chat.returncode == 0, out + err
        assert out.split()[-1:] == ["stopped."], out
        assert "Task exception was never retrieved" not in err and "Traceback" not in err, err
        assert not reachable(f"127.0.0.1:{port}")
    finally:
        _kill_group(chat)
        model.close()


def test_sigterm_stops_a_foreground_dev_and_its_embedded_server(tmp_path):
    env, port, api_port = _env(tmp_path, "dev")
    dev = _start(env, "dev")
    try:
        assert _get_json(f"http://127.0.0.1:{api_port}/healthz")["status"] == "ok"  # its worker polls
        dev.send_signal(signal.SIGTERM)  # while it may still be starting its codec server
        said, _ = dev.communicate(timeout=60)
        assert dev.returncode == 0, said
        assert "stopped." in said
        assert not reachable(f"127.0.0.1:{port}")  # before: the embedded server kept running, ports held
    finally:
        _kill_group(dev)  # only what a failed test left


def test_sigterm_to_a_dev_that_has_served_a_while_stops_it_in_seconds(tmp_path):
    """A new user's SIGTERM 22-25 s after start left `statekeeper dev` hung in 4 of 7 tries
    (asyncio.run cancelling its last tasks for ever, services and server running): uvicorn
    re-raised the signal it had caught after each server's shutdown, and the second one was a
    ``KeyboardInterrupt`` inside the event loop. Here it stopped 2 times out of 3 before."""
    env, port, api_port = _env(tmp_path, "dev-later")
    dev = _start(env, "dev")
    try:
        assert _get_json(f"http://127.0.0.1:{api_port}/healthz")["status"] == "ok"
        time.sleep(25)
        dev.send_signal(signal.SIGTERM)
        said, _ = dev.communicate(timeout=20)
        assert dev.returncode == 0 and said.split()[-1:] == ["stopped."], said
        assert not reachable(f"127.0.0.1:{port}")
    finally:
        _kill_group(dev)


def test_ctrl_c_at_the_terminal_stops_dev_without_sdk_warnings(tmp_path):
    """A terminal's Ctrl-C goes to the whole process group. It reached the embedded Temporal
    server too, which went down while the worker shut down: "WARN temporalio_sdk_core::worker:
    shutdown_worker rpc errored during worker shutdown" on about every other stop."""
    env, port, api_port = _env(tmp_path, "dev-group")
    dev = _start(env, "dev")
    try:
        assert _get_json(f"http://127.0.0.1:{api_port}/healthz")["status"] == "ok"
        time.sleep(3)
        os.killpg(dev.pid, signal.SIGINT)
        said, _ = dev.communicate(timeout=60)
        assert dev.returncode == 0 and said.split()[-1:] == ["stopped."], said
        assert "WARN" not in said and "shutdown_worker" not in said, said
        assert not reachable(f"127.0.0.1:{port}")
    finally:
        _kill_group(dev)


def test_a_second_signal_while_dev_stops_is_ignored(tmp_path):
    """SIGTERM then Ctrl-C 0.1 s later (a supervisor, then an impatient user): before, the
    second one raised ``KeyboardInterrupt`` inside the event loop, the API's and the codec
    server's tracebacks were printed, and `statekeeper dev` hung with its server running."""
    env, port, api_port = _env(tmp_path, "dev-twice")
    dev = _start(env, "dev")
    try:
        assert _get_json(f"http://127.0.0.1:{api_port}/healthz")["status"] == "ok"
        _until_reachable(f"127.0.0.1:{env['STATEKEEPER_CODEC_PORT']}")  # every server it serves is up
        dev.send_signal(signal.SIGTERM)
        time.sleep(0.1)
        dev.send_signal(signal.SIGINT)
        _stopped_quietly(dev, f"127.0.0.1:{port}")
    finally:
        _kill_group(dev)


@pytest.mark.parametrize("command, signals", [
    ("api", (signal.SIGTERM, signal.SIGINT)), ("api", (signal.SIGINT, signal.SIGINT)), ("api", (signal.SIGTERM,)),
    ("codec-server", (signal.SIGTERM, signal.SIGINT)), ("codec-server", (signal.SIGINT,)),
])
def test_api_and_codec_server_stop_once_whatever_signals_follow(tmp_path, command, signals):
    """Before, uvicorn caught the signals and re-raised each after its shutdown: a second one
    printed a ``KeyboardInterrupt`` and a ``CancelledError`` traceback. No Temporal server is
    needed (the API connects on demand)."""
    env, _, port = _env(tmp_path, command)
    env.update(STATEKEEPER_TEMPORAL_ADDRESS="127.0.0.1:1",
               STATEKEEPER_CODEC_KEYS="k1:YmVuY2gtY29kZWMta2V5LTAxMjM0NTY3ODlhYmNkZWY=")
    served = _start(env, command, "--port", str(port))
    try:
        _until_reachable(f"127.0.0.1:{port}")
        for sig in signals:
            served.send_signal(sig)
            time.sleep(0.05)
        _stopped_quietly(served, f"127.0.0.1:{port}")
    finally:
        _kill_group(served)


def test_sigterm_while_dev_starts_stops_what_it_started(tmp_path):
    env, port, _ = _env(tmp_path, "early")
    dev = _start(env, "dev")
    try:
        _until_reachable(f"127.0.0.1:{port}", step=0.05)
        dev.send_signal(signal.SIGTERM)  # the embedded server answers; its worker may not poll yet
        _stopped_quietly(dev, f"127.0.0.1:{port}")
    finally:
        _kill_group(dev)


def test_sigterm_while_dev_starts_its_codec_server_stops_every_server_quietly(tmp_path):
    """A SIGTERM once the HTTP API listens, before the codec server does: the starting server
    was left running, cancelled when asyncio.run ended, and its lifespan printed a
    ``CancelledError`` traceback (seen when a test stopped a dev right after /healthz)."""
    env, port, api_port = _env(tmp_path, "mid-start")
    dev = _start(env, "dev")
    try:
        _until_reachable(f"127.0.0.1:{api_port}", seconds=90, step=0.01)
        dev.send_signal(signal.SIGTERM)
        _stopped_quietly(dev, f"127.0.0.1:{port}")  # no CancelledError traceback either
        assert not reachable(f"127.0.0.1:{env['STATEKEEPER_CODEC_PORT']}")
    finally:
        _kill_group(dev)
