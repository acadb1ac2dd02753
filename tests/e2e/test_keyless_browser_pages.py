"""The keyless loopback servers (``statekeeper api``/``dev`` without API keys, and ``dev``'s codec
server) refuse what a browser on this machine sends for a web page elsewhere.

A browser is a loopback caller for every site it opens. Before this, a page of any site could
cancel a conversation with a bodiless ``POST /conversations/{id}/cancel`` (a request browsers
send cross-site without a preflight: 202, "cancelled by the backend"), and after pointing its
own name at 127.0.0.1 (DNS rebinding: ``Host: attacker.example``) read every transcript as
its own origin (200, the customer's email in it). Now the ``Host`` must name a loopback
address and an ``Origin`` must be a page served on one (or a configured codec CORS origin).
"""

from __future__ import annotations

import json

import httpx
import pytest

from settings import Settings
from starter.api.application import create_app
from starter.api.auth import access_from_settings
from starter.api.codec_server import codec_app, local_access
from starter.runtime.codec import payload_codec

FOREIGN_HOST = "this server runs without keys and answers requests addressed to 127.0.0.1, ::1 or localhost only"
FOREIGN_PAGE = "this server runs without keys and answers pages served on this machine's loopback address only"


def _no_temporal():
    raise RuntimeError("no Temporal server here")


@pytest.fixture
def api(tmp_path):
    settings = Settings(data_dir=tmp_path)
    return create_app(_no_temporal, access=access_from_settings(settings, "127.0.0.1"))


async def _ask(app, base_url: str, method: str, path: str, origin: str | None = None) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000), raise_app_exceptions=False)
    headers = {"Origin": origin} if origin is not None else {}
    async with httpx.AsyncClient(transport=transport, base_url=base_url) as http:
        return await http.request(method, path, headers=headers)


@pytest.mark.parametrize("base_url", ["http://attacker.example:8000", "http://127.0.0.1.attacker.example",
                                      "http://10.0.0.5:8000"])
async def test_a_rebound_host_is_refused_before_anything_is_read(api, base_url):
    response = await _ask(api, base_url, "GET", "/conversations/c-1/transcript")
    assert response.status_code == 403 and response.json() == {"detail": FOREIGN_HOST}


@pytest.mark.parametrize("origin", ["http://attacker.example", "null", "http://[bad"])
async def test_a_cross_site_post_is_refused(api, origin):
    response = await _ask(api, "http://127.0.0.1:8000", "POST", "/conversations/c-1/cancel", origin)
    assert response.status_code == 403 and response.json() == {"detail": FOREIGN_PAGE}


@pytest.mark.parametrize("base_url, origin", [
    ("http://127.0.0.1:8000", None), ("http://localhost:8000", None), ("http://[::1]:8000", None),
    ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),  # the API's own /docs page
    ("http://localhost:8000", "http://localhost:8233"),
])
async def test_this_machines_own_callers_are_served(api, base_url, origin):
    response = await _ask(api, base_url, "GET", "/conversations/c-1", origin)
    assert response.status_code == 503  # past authentication: Temporal is what is missing here


async def test_the_dev_codec_server_takes_its_web_ui_and_configured_origins_only(tmp_path):
    settings = Settings(data_dir=tmp_path, ui_port=8233, codec_cors_origins="https://ui.example.com")
    from starter.runtime.codec import codec_keyring

    codec_keyring(settings, create=True)
    app = codec_app(payload_codec(settings), ["https://ui.example.com"], local_access(settings))
    body = {"payloads": []}

    async def decode(base_url: str, origin: str | None) -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
        headers = {"Origin": origin} if origin else {}
        async with httpx.AsyncClient(transport=transport, base_url=base_url) as http:
            return await http.post("/decode", content=json.dumps(body), headers=headers)

    for origin in ("http://127.0.0.1:8233", "https://ui.example.com", None):
        assert (await decode("http://127.0.0.1:8234", origin)).status_code == 200, origin
    refused = await decode("http://127.0.0.1:8234", "http://attacker.example")
    assert refused.status_code == 403 and refused.json() == {"detail": FOREIGN_PAGE}
    rebound = await decode("http://attacker.example:8234", None)
    assert rebound.status_code == 403 and rebound.json() == {"detail": FOREIGN_HOST}
