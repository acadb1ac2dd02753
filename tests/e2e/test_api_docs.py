"""The HTTP API's own documentation:

- its OpenAPI document declares every status each route answers (404, 409 and 400 included),
  with the one refusal shape the API sends (``{"detail": str}``, also for 422, never FastAPI's
  list of errors); schemathesis, generating schema-valid and schema-violating requests for
  every operation, finds nothing: no 5xx, no undeclared status, no response off its schema,
  every invalid request refused, every valid one accepted. Real HTTP (uvicorn on loopback), a
  real Temporal dev server and worker; schemathesis runs derandomized (a fixed seed) with a
  small number of examples per operation, so CI time stays small;
- ``/docs`` (Swagger UI) as a person opens it, in Debian's Chromium over real HTTP with every
  request that leaves the API's address refused: the page's script comes from the API
  (``starter.api.guard.documented_app``), not a CDN, so it renders without internet; its files
  are served without a key, like the page, and nothing else is; there is no ReDoc (``/redoc``),
  which would ask the vendor's CDN for its logo.
"""

from __future__ import annotations

from typing import Any

import httpx
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import ignored_auth, positive_data_acceptance

from activities.store.api_keys import KeyStore, Role
from starter.api.application import create_app
from starter.api.auth import access_from_settings
from starter.api.responses import COMMON, ROUTES, statuses_for
from starter.client.conversations import StatekeeperClient
from tests.e2e.test_web_ui import CHROMIUM, CHROMIUM_ARGS, playwright_api  # noqa: F401 (fixture)
from tests.live_api import blocking, live_api
from tests.workflow_harness import running_worker


# --- The OpenAPI document ---

EXAMPLES = 8
"""Examples per operation and mode (positive, negative): about 200 requests in all."""
SUCCESS = {"200", "201", "202", "204"}


def test_the_document_declares_every_status_of_every_route_with_the_refusal_shape():
    app = create_app(lambda: None)
    document = app.openapi()
    served = {(method.upper(), path) for path, operations in document["paths"].items() for method in operations}
    assert served == set(ROUTES), "every route is declared in starter.api.responses.ROUTES, and only they"
    assert "HTTPValidationError" not in document["components"]["schemas"]  # FastAPI's shape, never sent
    refusal = {"$ref": "#/components/schemas/Refusal"}
    assert document["components"]["schemas"]["Refusal"]["required"] == ["detail"]
    for (method, path), own in ROUTES.items():
        responses = document["paths"][path][method.lower()]["responses"]
        refusals = {code for code in responses if code not in SUCCESS}
        assert refusals == {str(code) for code in statuses_for(method, path)}, (method, path)
        assert set(COMMON + own) <= {int(code) for code in refusals}
        assert path == "/healthz" or {"401", "403"} <= refusals, (method, path)  # behind an API key
        for code in refusals:
            assert responses[code]["content"]["application/json"]["schema"] == refusal, (method, path, code)
    for method, path in [("POST", "/conversations/{conversation_id}/messages"),
                         ("GET", "/conversations/{conversation_id}"), ("POST", "/approvals/{approval_id}")]:
        assert {"404", "409", "413", "422"} <= set(document["paths"][path][method.lower()]["responses"])


def _schemathesis(base: str) -> list[str]:
    """Run every operation of the served document in both modes; returns the failures."""
    schema = schemathesis.openapi.from_url(f"{base}/openapi.json")
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                      suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy(generation_mode=mode))
            def check(case: Any) -> None:
                # served keyless on loopback by design (statekeeper dev, no key exists yet);
                # tests/e2e/test_api_auth.py checks every route's 401/403 once keys exist
                excluded = [ignored_auth]
                if mode.is_positive:
                    # What a schema cannot state, made true or left unchecked, each for its reason:
                    if isinstance(case.body, dict) and "store" in case.body:
                        case.body["store"] = "main"  # stores are data: only existing ones are valid
                    if case.query:
                        case.query.pop("next_page_token", None)  # valid only as a page of this API
                    if operation.label == "GET /conversations/{conversation_id}/events":
                        # a running conversation's stream stays open while it waits for events
                        case.query = {**(case.query or {}), "wait": 0}
                    if operation.label == "POST /refunds":
                        # the arguments each operation needs are its tool's (422 names the missing one)
                        excluded.append(positive_data_acceptance)
                    if operation.label == "POST /webhooks":
                        # a webhook URL's host must resolve to an address webhooks may reach (422 says which)
                        excluded.append(positive_data_acceptance)
                response = case.call(base_url=base, timeout=60)
                case.validate_response(response, excluded_checks=excluded)

            try:
                check()
            except Unsatisfiable:
                assert mode is GenerationMode.NEGATIVE  # nothing to make invalid (GET /healthz)
            except BaseException as err:  # noqa: BLE001 (schemathesis raises a FailureGroup)
                failures.append(f"{operation.label} ({mode.value}): {err}")
    return failures


async def test_schemathesis_finds_nothing(temporal_env, settings):
    async with running_worker(temporal_env, settings):
        client = StatekeeperClient(temporal_env.client, settings.task_queue, pseudonym_key="test-key")
        async with live_api(client, settings) as base:
            failures = await blocking(_schemathesis, base, timeout=300)
    assert not failures, "\n\n".join(failures)


# --- Swagger UI ---

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
