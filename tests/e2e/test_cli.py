"""The `statekeeper` CLI as a user runs it: `dev --detach`, `chat`, `state`, `stop`,
each a real process against a real embedded Temporal server and Web UI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from starter.dev.server import reachable
from tests.ports import free_port
from tests.policy_fixtures import EMAIL, PENDING

ROOT = Path(__file__).resolve().parents[2]


def _cli(env: dict, *args: str, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "starter.cli.app", *args], cwd=ROOT, env=env, input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def _get_json(url: str, seconds: float = 120) -> dict:
    """GET ``url`` until it answers 200 (a worker shows as a poller after its first poll).

    The wait is a deadline in seconds, not a count of tries: on a loaded 2-core machine
    `statekeeper dev` takes tens of seconds to start its server, worker and API."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.loads(response.read())
        except OSError:  # connection refused, or 503 while the worker's first poll is on its way
            time.sleep(0.2)
    raise AssertionError(f"{url} never answered 200 in {seconds:.0f} s")


def test_dev_detach_chat_state_stop(tmp_path):
    port, ui_port, api_port, api2_port = free_port(), free_port(), free_port(), free_port()
    env = dict(os.environ, STATEKEEPER_TEMPORAL_ADDRESS=f"127.0.0.1:{port}", STATEKEEPER_UI_PORT=str(ui_port),
               STATEKEEPER_API_PORT=str(api_port), STATEKEEPER_SERVICES_PORT=str(free_port()),
               STATEKEEPER_CODEC_PORT=str(free_port()),
               STATEKEEPER_DATA_DIR=str(tmp_path / "data"), STATEKEEPER_DEV_STATE_FILE=str(tmp_path / "dev.json"),
               COLUMNS="200", STATEKEEPER_APPROVAL_THRESHOLD="100000")  # the cancel (826.70) needs no supervisor
    env.pop("ANTHROPIC_API_KEY", None)
    try:
        started = _cli(env, "dev", "--detach")
        assert started.returncode == 0, started.stdout + started.stderr
        assert "WITHOUT authentication" in " ".join(started.stdout.split())  # no keys: loopback only, said so
        assert reachable(f"127.0.0.1:{port}")
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/namespaces/default/workflows", timeout=30) as page:
            assert page.status == 200  # the Web UI answers while the background server runs

        script = f"Hi, my email is {EMAIL}\nPlease cancel order {PENDING}, I ordered it by mistake\nyes\nquit\n"
        chat = _cli(env, "chat", "--conversation-id", "cli-chat", stdin=script)
        assert chat.returncode == 0, chat.stdout + chat.stderr
        assert "Please confirm: Cancel order #W4566809" in chat.stdout and "cancelled" in chat.stdout
        # the banner links the conversation's own runs, not the whole workflow list
        link = f"http://127.0.0.1:{ui_port}/namespaces/default/workflows?query=WorkflowId%3D%22support-cli-chat%22"
        assert link in chat.stdout, chat.stdout
        with urllib.request.urlopen(link, timeout=30) as page:
            assert page.status == 200

        # Ctrl-D (the end of input) at the prompt ends the chat as "quit" does, not "Aborted.", status 1
        ended = _cli(env, "chat", "--conversation-id", "cli-chat-eof", stdin=f"Hi, my email is {EMAIL}\n")
        assert ended.returncode == 0 and "Aborted" not in ended.stdout + ended.stderr, ended.stdout + ended.stderr
        assert "agent>" in ended.stdout
        # chat on a finished conversation's id: one line and status 1, not a page of traceback
        done = _cli(env, "chat", "--conversation-id", "cli-chat-eof", stdin="thanks\n")
        assert "conversation ended" in done.stdout, done.stdout + done.stderr
        again = _cli(env, "chat", "--conversation-id", "cli-chat-eof", stdin="hello\n")
        assert again.returncode == 1, again.stdout + again.stderr
        # named as every command's refusal is ("statekeeper: ..."); chat and state said it bare
        assert "statekeeper: conversation cli-chat-eof has finished; start a new conversation" in " ".join(
            again.stderr.split())
        unknown = _cli(env, "state", "no-such-chat")
        assert unknown.returncode == 1 and unknown.stderr.startswith("statekeeper: conversation no-such-chat does not"), \
            unknown.stderr
        assert "Traceback" not in again.stdout + again.stderr

        shown = _cli(env, "state", "support-cli-chat")  # the workflow id is accepted too
        assert shown.returncode == 0, shown.stdout + shown.stderr
        state = json.loads(shown.stdout)
        assert state["customer"]["user_id"] == "raj_sanchez_2970"
        assert [op["tool"] for op in state["completed_operations"]] == ["cancel_pending_order"]

        # `statekeeper dev` serves the HTTP API beside its worker; `statekeeper api` serves it alone
        assert _get_json(f"http://127.0.0.1:{api_port}/healthz")["status"] == "ok"
        served = _get_json(f"http://127.0.0.1:{api_port}/conversations/cli-chat")
        assert served["completed_operations"][0]["tool"] == "cancel_pending_order"
        alone = subprocess.Popen([sys.executable, "-m", "starter.cli.app", "api", "--port", str(api2_port)], cwd=ROOT,
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            assert _get_json(f"http://127.0.0.1:{api2_port}/healthz")["status"] == "ok"
            assert "/refunds" in _get_json(f"http://127.0.0.1:{api2_port}/openapi.json")["paths"]
        finally:
            alone.terminate()
            alone.wait(timeout=20)
    finally:
        stopped = _cli(env, "stop")
    assert "stopped" in stopped.stdout
    assert not reachable(f"127.0.0.1:{port}")
