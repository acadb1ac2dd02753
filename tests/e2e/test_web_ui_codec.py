"""Encrypted payloads as an operator sees them, on a keyless loopback
`statekeeper dev`: no codec key configured, so dev makes one in its data directory (0600),
serves the codec server and starts the embedded server with ``--ui-codec-endpoint``. A
conversation driven over dev's HTTP API is left awaiting a supervisor's approval. In Debian's
Chromium the Web UI shows the run's input and the activity summaries decrypted (through
``POST /decode`` on the codec server) and its current details readable, while the raw history,
fetched by a client WITHOUT the codec, holds none of the customer's email, name, address or
payment method ids (and does hold them once decrypted with the key: the scan can fail); the
``temporal`` CLI reads that history decrypted with ``--codec-endpoint``."""

from __future__ import annotations

import asyncio
import base64
import stat
import subprocess
import time
from collections import Counter

import httpx

from settings import Settings
from starter.runtime.codec import KEY_FILE
from starter.runtime.connection import data_converter
from tests.e2e.test_pii_scan import _cli, _env
from tests.e2e.test_web_ui import CHROMIUM, CHROMIUM_ARGS, playwright_api  # noqa: F401 (fixture)
from tests.conftest import temporal_cli
from tests.pii_scan import ENCRYPTED_B64, needles_for, raw_histories, scan_histories
from tests.policy_fixtures import CUSTOMER, EMAIL, PENDING, data


async def _drive_to_approval(api: str, cid: str) -> None:
    async with httpx.AsyncClient(base_url=api, timeout=60) as http:
        opened = await http.post("/conversations", json={"conversation_id": cid, "text": f"Hi, my email is {EMAIL}"})
        assert opened.status_code == 201, opened.text
        asked = await http.post(f"/conversations/{cid}/messages",
                                json={"text": f"Please cancel order {PENDING}, I ordered it by mistake"})
        assert asked.json()["awaiting_confirmation"], asked.text
        waiting = await http.post(f"/conversations/{cid}/messages", json={"text": "yes"})
        assert waiting.json().get("awaiting_approval"), waiting.text  # 826.70 is over the 500.00 threshold


async def _text_until(page, *needles: str, timeout_seconds: float = 30.0) -> str:
    """The page's text once it holds every needle (or at the deadline): the timeline's rows and
    the decoded input arrive from separate codec calls, in either order."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        text = await page.locator("body").inner_text()
        if all(needle in text for needle in needles) or time.monotonic() > deadline:
            return text
        await asyncio.sleep(0.5)


async def _current_details(page, timeout_seconds: float = 30.0) -> str:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        for frame in page.frames:
            if "/render" in frame.url:
                text = await frame.locator("body").inner_text()
                if "Current step:" in text:
                    return text
        await asyncio.sleep(0.5)
    raise AssertionError("no readable current details")


async def test_the_web_ui_decrypts_through_the_codec_server_and_the_raw_history_holds_no_personal_data(
        tmp_path, playwright_api):  # noqa: F811
    env = _env(tmp_path, codec=True)
    assert "STATEKEEPER_CODEC_KEYS" not in env  # keyless: dev makes the key
    ui, codec_url = f"http://127.0.0.1:{env['STATEKEEPER_UI_PORT']}", f"http://127.0.0.1:{env['STATEKEEPER_CODEC_PORT']}"
    cid, workflow_id = "ui-codec", "support-ui-codec"
    key_file = tmp_path / "data" / KEY_FILE
    try:
        started = _cli(env, "dev", "--detach", timeout=120)
        assert started.returncode == 0, started.stdout + started.stderr
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        log = (tmp_path / "data" / "dev.log").read_text()
        assert f"codec server {codec_url}" in " ".join(log.split())
        await _drive_to_approval(f"http://127.0.0.1:{env['STATEKEEPER_API_PORT']}", cid)

        async with playwright_api.async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = await browser.new_page(viewport={"width": 1400, "height": 1000})
            decoded_by_codec = []
            page.on("requestfinished", lambda request: decoded_by_codec.append(request.url)
                    if request.url.startswith(f"{codec_url}/decode") else None)
            try:
                await page.goto(f"{ui}/namespaces/default/workflows/{workflow_id}")
                # reads are local activities (a marker, no timeline row): the model call's summary shows
                text = await _text_until(page, "model proposes the next action (turn 1)",
                                         f'"conversation_id": "{cid}"', '"store": "main"')
                await page.screenshot(path=str(tmp_path / "decrypted-input.png"), full_page=True)
                assert f'"conversation_id": "{cid}"' in text and '"store": "main"' in text  # the decrypted input
                assert "model proposes the next action (turn 1)" in text  # an activity summary, decrypted
                assert "binary/encrypted" not in text
                assert decoded_by_codec  # the browser itself called the codec server
                await page.get_by_text("User Metadata").first.click()
                details = await _current_details(page)
                await page.screenshot(path=str(tmp_path / "current-details.png"), full_page=True)
                assert "Current step: awaiting_approval" in details
                assert f"cancel_pending_order on {PENDING}, amount 826.70" in details
                assert EMAIL not in details and CUSTOMER not in details
            finally:
                await browser.close()

        # the temporal CLI reads the same history through the codec server
        shown = subprocess.run([temporal_cli(), "workflow", "show", "-w", workflow_id, "--output", "json",
                                "--address", env["STATEKEEPER_TEMPORAL_ADDRESS"], "--codec-endpoint", codec_url],
                               capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0, shown.stderr
        assert ENCRYPTED_B64 not in shown.stdout and base64.b64encode(b"json/plain").decode() in shown.stdout
        histories = await raw_histories(env["STATEKEEPER_TEMPORAL_ADDRESS"])
        # the control: the very same events decrypted with the key dev made
        codec = data_converter(Settings(data_dir=tmp_path / "data", codec_keys=None)).payload_codec
        decrypted = await raw_histories(env["STATEKEEPER_TEMPORAL_ADDRESS"], decrypt=codec.decrypt)
    finally:
        _cli(env, "stop", timeout=60)
    ours = {run: h for run, h in histories.items() if cid in run}
    assert [run.split("/")[0] for run in ours] == [workflow_id]  # the write waits: no refund run yet
    needles = needles_for(data()["users"], [CUSTOMER])
    assert +scan_histories(ours, needles) == Counter()
    assert all("binary/encrypted" in text for _, text in ours.values())
    found = scan_histories({run: (b"", text) for run, (_, text) in decrypted.items() if cid in run}, needles)
    assert all(found[kind] > 0 for kind in ("email", "name", "address", "payment method id")), found
