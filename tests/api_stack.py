"""The whole stack behind a keyed HTTP API, for end-to-end tests: a real worker (the offline
model) on the session's Temporal dev server, and the API served by uvicorn on a free loopback
port (``api_beside``, as ``statekeeper dev`` serves it) with API keys in its journal, so every
caller needs a key, loopback included.

    async with keyed_stack(temporal_env, tmp, {"svc": ("default", Role.SERVICE)}, stores=("s-1",)) as s:
        await s.http.post("/conversations", json={...}, headers=s.headers["svc"])
"""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable

import httpx

from activities.store.api_keys import KeyStore, Role
from settings import Settings
from starter.api.auth import access_from_settings
from starter.api.server import api_beside
from tests.ports import free_port


@contextlib.asynccontextmanager
async def keyed_stack(temporal_env: Any, tmp: Path, keys: dict[str, tuple[str, Role]], stores: Iterable[str] = (),
                      **settings_fields: Any) -> AsyncIterator[SimpleNamespace]:
    """Run the stack in ``tmp`` (its own SQLite files and task queue) with one API key per entry
    of ``keys`` (name → ``(tenant, role)``), each of ``stores`` seeded, and ``settings_fields``
    over the test defaults. Yields ``http`` (an ``httpx.AsyncClient`` on the API), ``url``,
    ``backend`` (the system of record), ``settings``, ``temporal`` (the client), ``address``
    (Temporal's ``host:port``), ``keys`` (name → key text), ``ids`` (name → key id) and
    ``headers`` (name → its ``Authorization`` header)."""
    from starter.runtime.worker import build_backend, build_worker

    fields = {"database_url": f"sqlite:///{tmp / 'sor.sqlite'}", "data_dir": tmp, "anthropic_api_key": None,
              "task_queue": f"{tmp.name[:20]}-{uuid.uuid4().hex[:8]}", "sandbox_project_modules": True}
    settings = Settings(**{**fields, **settings_fields})
    backend = build_backend(settings)
    for store in stores:
        backend.seed_store(store)
    store = KeyStore(settings.resolved_journal_url(), settings.api_key_hmac_secret())
    made = {name: store.create(tenant, role) for name, (tenant, role) in keys.items()}
    access = access_from_settings(settings, "127.0.0.1")
    assert not access.keyless  # keys exist: every caller needs one, loopback included
    async with build_worker(temporal_env.client, settings, backend):
        async with api_beside(temporal_env.client, settings, host="127.0.0.1", port=free_port(),
                              access=access) as url:
            async with httpx.AsyncClient(base_url=url, timeout=60.0) as http:
                yield SimpleNamespace(
                    http=http, url=url, backend=backend, settings=settings, temporal=temporal_env.client,
                    address=temporal_env.client.service_client.config.target_host, key_store=store,
                    keys={n: k for n, (_, k) in made.items()}, ids={n: r.key_id for n, (r, _) in made.items()},
                    headers={n: {"Authorization": f"Bearer {k}"} for n, (_, k) in made.items()})


async def open_conversation(s: SimpleNamespace, text: str, who: str = "svc", **body: Any
                            ) -> tuple[str, Callable[[str], Awaitable[dict]]]:
    """Start a conversation over ``s.http`` with ``text`` as its first message, as key ``who``
    (``body``: more fields of ``POST /conversations``, e.g. ``store``); returns its id and
    ``say(text)``, which sends the next message as the same key and returns the reply (any
    other answer than 201 or 200 fails the test)."""
    opened = await s.http.post("/conversations", json={"text": text, **body}, headers=s.headers[who])
    assert opened.status_code == 201, opened.text
    cid = opened.json()["conversation_id"]

    async def say(message: str) -> dict:
        response = await s.http.post(f"/conversations/{cid}/messages", json={"text": message}, headers=s.headers[who])
        assert response.status_code == 200, response.text
        return response.json()

    return cid, say
