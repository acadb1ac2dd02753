"""The HTTP API's own documentation as a person opens it: ``/docs`` (Swagger UI) in Debian's
Chromium, over real HTTP, with every request that leaves the API's address refused. Before,
the page loaded its script from a CDN and stayed blank without internet (the README said
so); now it comes from the API (``starter.api.guard.documented_app``). Its files are served
without a key, like the page, and nothing else is. ReDoc (``/redoc``) is gone: it asked the
vendor's CDN for its logo, which this test caught."""

from __future__ import annotations

import httpx

from starter.api.auth import access_from_settings
from starter.client.conversations import StatekeeperClient
from activities.store.api_keys import KeyStore, Role
from tests.e2e.test_web_ui import CHROMIUM, CHROMIUM_ARGS, playwright_api  # noqa: F401 (fixture)
from tests.live_api import live_api


async def _rendered(pw, url: str, base: str, needle: str) -> tuple[str, list[str]]:
    """The page's text once ``needle`` shows, and the URLs it asked for outside ``base`` (refused)."""
    browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    outside: list[str] = []

    async def only_the_api(route) -> None:
        if route.request.url.startswith(base):
            await route.continue_()
        else:
            outside.append(route.request.url)
            await route.abort()

    try:
        page = await browser.new_page()
        await page.route("**/*", only_the_api)
        await page.goto(url)
        await page.get_by_text(needle).first.wait_for(timeout=30_000)
        return await page.inner_text("body"), outside
    finally:
        await browser.close()


async def test_swagger_ui_renders_from_the_api_alone(temporal_env, settings, playwright_api):  # noqa: F811
    client = StatekeeperClient(temporal_env.client, settings.task_queue)
    KeyStore(settings.resolved_journal_url(), settings.api_key_hmac_secret()).create("default", Role.SERVICE)
    access = access_from_settings(settings, "127.0.0.1")
    assert not access.keyless  # a key exists: every other path needs one, loopback included
    async with live_api(client, settings, access) as base:
        async with playwright_api.async_playwright() as pw:
            swagger, asked_swagger = await _rendered(pw, f"{base}/docs", base, "/conversations/{conversation_id}/messages")
        async with httpx.AsyncClient(base_url=base) as http:
            script = await http.get("/docs/static/swagger-ui-bundle.js")
            beside = await http.get("/docs/static-other")
            conversations = await http.get("/conversations")
            redoc = await http.get("/redoc")
    assert "POST" in swagger and "/conversations/{conversation_id}/cancel" in swagger
    assert asked_swagger == []  # no CDN, no font service, nothing outside
    assert redoc.status_code == 401
    assert script.status_code == 200 and "SwaggerUIBundle" in script.text
    assert beside.status_code == 401 and conversations.status_code == 401  # the open prefix is the folder only
