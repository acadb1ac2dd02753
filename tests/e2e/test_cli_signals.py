"""Signals to the ``statekeeper`` CLI as a user, a terminal or a supervisor sends them, to real
processes with a real embedded server:

- Ctrl-C at the chat prompt ends the chat at once; SIGTERM or SIGHUP to a chat stops the
  embedded server it started; an interrupt while a chat waits for a reply says "stopped." and
  nothing else;
- SIGTERM (``kill``, ``docker stop``, systemd), Ctrl-C at the terminal (the whole process group)
  or SIGHUP (a closed terminal) to a foreground ``statekeeper dev`` stops it and the embedded
  Temporal server it started, at any point of its start or its life, quietly and in seconds;
  ``nohup`` keeps it running; a second signal while it stops, or a Ctrl-C held down through its
  exit, is ignored; ``api`` and ``codec-server`` stop once whatever signals follow;
- Ctrl-C or SIGTERM in the first second of any command, while Python is still importing the
  command line (about 1.5 s on a loaded 2-core machine, before any command runs): the command
  stops quietly with status 130, no import-machinery traceback (the console script and
  ``python -m starter.cli.app``).
"""

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
from tests.ports import free_port


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
    port, api_port = free_port(), free_port()
    env = dict(os.environ, STATEKEEPER_TEMPORAL_ADDRESS=f"127.0.0.1:{port}", STATEKEEPER_UI_PORT=str(free_port()),
               STATEKEEPER_API_PORT=str(api_port), STATEKEEPER_SERVICES_PORT=str(free_port()),
               STATEKEEPER_CODEC_PORT=str(free_port()),
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
        rest, _ = chat.communicate(timeout=30)  # not waiting for Enter
        assert chat.returncode == 0 and "stopped." in rest
        assert not reachable(f"127.0.0.1:{port}")  # its embedded server stopped with it
    finally:
        _kill_group(chat)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_a_hangup_at_the_chat_prompt_stops_its_embedded_server(tmp_path, sig):
    """Not status -15 (SIGTERM) or -1 (SIGHUP: a closed terminal) with the embedded server left running."""
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
    """No asyncio "Task exception was never retrieved" with the SDK's
    WorkflowUpdateRPCTimeoutOrCancelledError traceback: the task ``asyncio.wait_for`` makes for
    the update's result ends with that error when cancelled, and it is read."""
    env, port, _ = _env(tmp_path, f"chat-wait-{sig.name}")
    model, calls = _silent_model()
    env.update(ANTHROPIC_API_KEY="sk-ant-test-not-a-key",
               STATEKEEPER_ANTHROPIC_BASE_URL=f"http://127.0.0.1:{model.getsockname()[1]}")
    chat = _start(env, "chat", "--conversation-id", f"waiting-{sig.name.lower()}", stderr=subprocess.PIPE)
    try:
        first = chat.stdout.readline()
        if not first:  # chat ended before its banner (a signal that came early): say why
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
        assert not reachable(f"127.0.0.1:{port}")  # the embedded server does not keep its ports
    finally:
        _kill_group(dev)  # only what a failed test left


def test_sigterm_to_a_dev_that_has_served_a_while_stops_it_in_seconds(tmp_path):
    """A SIGTERM 22-25 s after start stops `statekeeper dev`, never leaving it hung (asyncio.run
    cancelling its last tasks for ever, services and server running): uvicorn, left to itself,
    re-raises the signal it caught after each server's shutdown, and the second one is a
    ``KeyboardInterrupt`` inside the event loop."""
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
    """A terminal's Ctrl-C goes to the whole process group. Were it to reach the embedded
    Temporal server too, that server would go down while the worker shuts down: "WARN
    temporalio_sdk_core::worker: shutdown_worker rpc errored during worker shutdown"."""
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
    """SIGTERM then Ctrl-C 0.1 s later (a supervisor, then an impatient user): the second one
    raises no ``KeyboardInterrupt`` inside the event loop, prints no API or codec server
    traceback, and `statekeeper dev` does not hang with its server running."""
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
    """uvicorn, left to itself, catches the signals and re-raises each after its shutdown: a
    second one would print a ``KeyboardInterrupt`` and a ``CancelledError`` traceback. No Temporal
    server is needed (the API connects on demand)."""
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
    """A SIGTERM once the HTTP API listens, before the codec server does (a test stopping a dev
    right after /healthz): the starting server is stopped too, not left running to be cancelled
    when asyncio.run ends with its lifespan printing a ``CancelledError`` traceback."""
    env, port, api_port = _env(tmp_path, "mid-start")
    dev = _start(env, "dev")
    try:
        _until_reachable(f"127.0.0.1:{api_port}", seconds=90, step=0.01)
        dev.send_signal(signal.SIGTERM)
        _stopped_quietly(dev, f"127.0.0.1:{port}")  # no CancelledError traceback either
        assert not reachable(f"127.0.0.1:{env['STATEKEEPER_CODEC_PORT']}")
    finally:
        _kill_group(dev)


# --- A closed terminal and a Ctrl-C storm to dev ---

def test_sighup_stops_a_foreground_dev_and_its_embedded_server(tmp_path):
    env, port, api_port = _env(tmp_path, "hangup")
    dev = _start(env, "dev")
    try:
        assert _get_json(f"http://127.0.0.1:{api_port}/healthz")["status"] == "ok"
        dev.send_signal(signal.SIGHUP)
        _stopped_quietly(dev, f"127.0.0.1:{port}")  # not killed (-1) with its server left listening
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


# --- A signal while the command line loads ---

SCRIPT = str(Path(sys.executable).with_name("statekeeper"))


@pytest.mark.parametrize("launcher", [[SCRIPT], [sys.executable, "-m", "starter.cli.app"]], ids=["script", "module"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_while_the_command_line_loads_stops_it_quietly(tmp_path, launcher, signum):
    env = dict(os.environ, STATEKEEPER_DATA_DIR=str(tmp_path), STATEKEEPER_DEV_STATE_FILE=str(tmp_path / "dev.json"))
    proc = subprocess.Popen([*launcher, "keys", "list"], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    started = time.monotonic()
    time.sleep(0.5)  # the interpreter is up, the command line's imports are not done
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - started < 60
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert "API keys" not in out  # stopped before the command ran, not after it
