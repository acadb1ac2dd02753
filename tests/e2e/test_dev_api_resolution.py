"""The HTTP API that `statekeeper dev` serves checks an operator's resolution against the
external services it serves too. It was given the settings from before the services
started, so it had no payments URL: a cancel whose money never moved (the payments service
answering 503 to every attempt, the step escalated as unknown) was resolved ``applied``
over HTTP, and the customer was told "it went through: ... is refunded", while
`statekeeper resolve` refused the same resolution (a new user's report). A real detached dev
process, its embedded server, worker, services and API."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx

from tests.e2e.test_cli_signals import ROOT, _env
from tests.policy_fixtures import EMAIL, PENDING


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "starter.cli.app", *args], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=120)


def _healthy(http: httpx.Client, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if http.get("/healthz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("the dev's API never became healthy")


def test_the_dev_api_refuses_an_applied_resolution_for_money_that_never_moved(tmp_path):
    env, _, api_port = _env(tmp_path, "resolve")
    env["STATEKEEPER_APPROVAL_THRESHOLD"] = "100000"  # the cancel (826.70) needs no supervisor
    payments = f"http://127.0.0.1:{env['STATEKEEPER_SERVICES_PORT']}"
    try:
        started = _cli(env, "dev", "--detach")
        assert started.returncode == 0, started.stdout + started.stderr
        with httpx.Client(base_url=f"http://127.0.0.1:{api_port}", timeout=120) as http:
            _healthy(http)
            # every payment attempt answers 503: the retail write applies, the money's fate is unknown
            assert httpx.post(f"{payments}/_faults", json={"kind": "http_5xx", "count": 100}).status_code == 204
            cid = "dev-unmoved"
            assert http.post("/conversations", json={"conversation_id": cid,
                                                     "text": f"Hi, my email is {EMAIL}"}).status_code == 201
            shown = http.post(f"/conversations/{cid}/messages",
                              json={"text": f"Please cancel order {PENDING}, I ordered it by mistake"})
            assert shown.json()["awaiting_confirmation"], shown.text
            assert http.post(f"/conversations/{cid}/messages", json={"text": "yes"}).json()["status"] == "escalated"
            [step] = [s for s in http.get(f"/conversations/{cid}").json()["steps"] if s["status"] == "unknown"]

            refused = http.post(f"/conversations/{cid}/resolutions", json={
                "step_id": step["step_id"], "outcome": "applied", "operator": "op-1", "note": "checked the order"})
            assert refused.status_code == 409, refused.text
            assert "the money has not moved" in refused.json()["detail"]
            state = http.get(f"/conversations/{cid}").json()
            assert state["status"] == "escalated" and state["resolutions"] == []
    finally:
        _cli(env, "stop")
