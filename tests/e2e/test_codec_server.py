"""The codec server over real HTTP (``starter.api.codec_server``): Temporal's remote codec
protocol as the Web UI speaks it (JSON ``Payloads``, ``X-Namespace``, a CORS preflight from
the UI's origin), its refusals, the API's authentication (keyless loopback, operator keys)
with every call audited, and ``statekeeper codec-server`` as a process."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from settings import Settings
from activities.store.audit import AuditLog
from starter.runtime.codec import ENCODING
from starter.api.codec_server import BODY_LIMIT_BYTES, codec_beside, served_access
from activities.store.api_keys import KeyStore, Role
from starter.runtime.preflight import StartupRefused
from tests.ports import free_port
from tests.policy_fixtures import EMAIL

ROOT = Path(__file__).resolve().parents[2]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def plain(text: str) -> dict:
    return {"metadata": {"encoding": b64(b"json/plain")}, "data": b64(json.dumps(text).encode())}


@pytest.fixture
async def served(tmp_path):
    settings = Settings(data_dir=tmp_path, ui_port=free_port())
    async with codec_beside(settings, port=free_port()) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            yield http, settings


async def test_encode_then_decode_round_trips_what_the_web_ui_sends(served):
    http, settings = served
    headers = {"X-Namespace": "default", "Origin": f"http://127.0.0.1:{settings.ui_port}"}
    encoded = await http.post("/encode", json={"payloads": [plain(EMAIL), plain("#W4566809")]}, headers=headers)
    assert encoded.status_code == 200
    assert encoded.headers["access-control-allow-origin"] == f"http://127.0.0.1:{settings.ui_port}"
    sealed = encoded.json()["payloads"]
    assert [base64.b64decode(p["metadata"]["encoding"]) for p in sealed] == [ENCODING, ENCODING]
    assert [base64.b64decode(p["metadata"]["encryption-key-id"]) for p in sealed] == [b"test-2", b"test-2"]
    assert EMAIL not in encoded.text and b64(EMAIL.encode())[:12] not in encoded.text
    decoded = await http.post("/decode", json={"payloads": sealed}, headers=headers)
    assert decoded.status_code == 200 and decoded.json() == {"payloads": [plain(EMAIL), plain("#W4566809")]}
    # payloads recorded before the codec come back as they are
    legacy = await http.post("/decode", json={"payloads": [plain("old")]})
    assert legacy.json() == {"payloads": [plain("old")]}
    # keyless (dev): the local operator, every call in the audit log, without payload contents
    entries = AuditLog(settings.resolved_journal_url()).entries(actor="local")
    assert [(e.action, e.subject) for e in entries] == [("codec.encode", "namespace:default"),
                                                        ("codec.decode", "namespace:default"),
                                                        ("codec.decode", "namespace:default")]
    assert entries[0].detail.endswith("payloads=2") and EMAIL not in str(entries)


async def test_with_api_keys_only_an_operator_key_decodes(tmp_path):
    settings = Settings(data_dir=tmp_path, ui_port=free_port())
    keys = KeyStore(settings.resolved_journal_url(), settings.api_key_hmac_secret())
    operator, operator_key = keys.create("default", Role.OPERATOR)
    _, service_key = keys.create("default", Role.SERVICE)
    _, customer_key = keys.create("default", Role.SERVICE, customer="cust-0123")
    access = served_access(settings, "0.0.0.0")  # keys exist: any bind, every caller needs one
    assert not access.keyless
    body = {"payloads": [plain(EMAIL)]}
    async with codec_beside(settings, port=free_port(), access=access) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            anonymous = await http.post("/encode", json=body)
            assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"] == "Bearer"
            wrong = await http.post("/encode", json=body, headers={"Authorization": "Bearer sk_nope_nope"})
            assert wrong.status_code == 401
            for key in (service_key, customer_key):
                refused = await http.post("/encode", json=body, headers={"Authorization": f"Bearer {key}"})
                assert refused.status_code == 403 and refused.json() == {"detail": "the codec server needs an operator key"}
            sealed = await http.post("/encode", json=body, headers={"Authorization": f"Bearer {operator_key}"})
            assert sealed.status_code == 200
            opened = await http.post("/decode", json=sealed.json(), headers={"X-API-Key": operator_key,
                                                                               "X-Namespace": "prod"})
            assert opened.json() == body
    entries = AuditLog(settings.resolved_journal_url()).entries(actor=f"key:{operator.key_id}")
    assert [(e.action, e.subject) for e in entries] == [("codec.encode", "namespace:default"),
                                                        ("codec.decode", "namespace:prod")]
    assert AuditLog(settings.resolved_journal_url()).entries(actor="local") == []  # refused calls decode nothing


async def test_another_tenants_operator_key_decodes_nothing(tmp_path):
    # every tenant's payloads are sealed with the same keys: an operator of tenant acme, whose
    # key reads nothing of another tenant through the API, decrypted the default tenant's too
    settings = Settings(data_dir=tmp_path, ui_port=free_port(), store_tenants={"acme-store": "acme"})
    keys = KeyStore(settings.resolved_journal_url(), settings.api_key_hmac_secret())
    _, operator_key = keys.create("default", Role.OPERATOR)
    acme, acme_key = keys.create("acme", Role.OPERATOR)
    async with codec_beside(settings, port=free_port(), access=served_access(settings, "0.0.0.0")) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            sealed = await http.post("/encode", json={"payloads": [plain(EMAIL)]}, headers={"X-API-Key": operator_key})
            assert sealed.status_code == 200
            for path, body in (("/decode", sealed.json()), ("/encode", {"payloads": [plain(EMAIL)]})):
                refused = await http.post(path, json=body, headers={"X-API-Key": acme_key})
                assert refused.status_code == 403, refused.text
                assert refused.json() == {"detail": "the codec server needs an operator key of the default tenant: "
                                                    "it decrypts every tenant's payloads"}
                assert EMAIL not in refused.text
    assert AuditLog(settings.resolved_journal_url()).entries(actor=f"key:{acme.key_id}") == []


def test_a_public_bind_needs_api_keys(tmp_path):
    with pytest.raises(StartupRefused, match="refusing to serve the codec server on 0.0.0.0 without API keys"):
        served_access(Settings(data_dir=tmp_path), "0.0.0.0")
    assert served_access(Settings(data_dir=tmp_path), "127.0.0.1").keyless


async def test_the_web_ui_origin_passes_the_preflight_and_another_origin_does_not(served):
    http, settings = served
    for origin in (f"http://127.0.0.1:{settings.ui_port}", f"http://localhost:{settings.ui_port}"):
        ok = await http.options("/decode", headers={"Origin": origin, "Access-Control-Request-Method": "POST",
                                                    "Access-Control-Request-Headers": "content-type,x-namespace"})
        assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == origin
        assert "x-namespace" in ok.headers["access-control-allow-headers"].lower()
    foreign = await http.options("/decode", headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
    assert foreign.status_code == 400 and "access-control-allow-origin" not in foreign.headers
    answered = await http.post("/decode", json={"payloads": []}, headers={"Origin": "http://evil.example"})
    assert "access-control-allow-origin" not in answered.headers  # the browser withholds the answer


@pytest.mark.parametrize("body, detail", [
    (b"not json", 'the body must be {"payloads": [...]}'),
    (b'{"payloads": "x"}', 'the body must be {"payloads": [...]}'),
    (b'{"payload": []}', 'the body must be {"payloads": [...]}'),
    (b"\xff\xfe", 'the body must be {"payloads": [...]}'),
    (b"[" * 5000 + b"]" * 5000, 'the body must be {"payloads": [...]}'),
    (json.dumps({"payloads": [{"metadata": {"encoding": b64(ENCODING), "encryption-key-id": b64(b"gone")},
                               "data": b64(b"x" * 40)}]}).encode(), "codec key 'gone', which is not configured"),
    (json.dumps({"payloads": [{"metadata": {"encoding": b64(ENCODING), "encryption-key-id": b64(b"test-2")},
                               "data": b64(b"x" * 40)}]}).encode(), "'test-2' does not decrypt"),
])
async def test_a_bad_body_or_a_payload_it_cannot_decrypt_is_422_and_the_server_keeps_serving(served, body, detail):
    http, _ = served
    refused = await http.post("/decode", content=body, headers={"content-type": "application/json"})
    assert refused.status_code == 422 and detail in refused.json()["detail"]
    assert (await http.post("/decode", json={"payloads": [plain("still")]})).json() == {"payloads": [plain("still")]}


async def test_a_body_over_the_limit_is_413(served):
    http, _ = served
    refused = await http.post("/encode", content=b" " * (BODY_LIMIT_BYTES + 1), headers={"content-type": "application/json"})
    assert refused.status_code == 413


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "starter.cli.app", "codec-server", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def test_the_command_refuses_a_public_bind_and_a_missing_key(tmp_path):
    env = dict(os.environ, STATEKEEPER_DATA_DIR=str(tmp_path), STATEKEEPER_DEV_STATE_FILE=str(tmp_path / "none.json"))
    public = _cli(env, "--host", "0.0.0.0", "--port", str(free_port()))
    assert public.returncode == 2 and "without API keys" in " ".join(public.stderr.split()), public.stdout + public.stderr
    assert public.stdout == ""  # a refusal is said on stderr
    env.pop("STATEKEEPER_CODEC_KEYS")
    keyless = _cli(env, "--port", str(free_port()))
    assert keyless.returncode == 2 and "no key is configured" in keyless.stderr, keyless.stdout + keyless.stderr
    assert "Traceback" not in keyless.stdout + keyless.stderr and not (tmp_path / "codec.keys").exists()


def test_the_command_serves_the_configured_keys(tmp_path):
    port = free_port()
    env = dict(os.environ, STATEKEEPER_DATA_DIR=str(tmp_path), STATEKEEPER_DEV_STATE_FILE=str(tmp_path / "none.json"))
    proc = subprocess.Popen([sys.executable, "-m", "starter.cli.app", "codec-server", "--port", str(port)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(150):
            try:
                answer = httpx.post(f"http://127.0.0.1:{port}/encode", json={"payloads": [plain("x")]}, timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stdout.read()
                time.sleep(0.1)
        else:
            raise AssertionError("the codec server never answered")
        assert answer.status_code == 200
        assert base64.b64decode(answer.json()["payloads"][0]["metadata"]["encryption-key-id"]) == b"test-2"
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=20)
    assert f"codec server on http://127.0.0.1:{port}" in out and "keyless" in out  # its INFO startup line


@pytest.mark.parametrize("namespace", [b"evil\x1b[2Kkey:x read_state", "a\u202eb".encode(), b"n" * 300, b"two words"])
async def test_a_namespace_that_is_not_one_is_refused_and_never_written_to_the_audit_log(served, namespace):
    """``X-Namespace`` is the caller's text and goes into the audit entry's subject, where every
    other subject is an id: an escape sequence (which rewrites the line a terminal shows), a
    bidirectional control or a thousand characters are refused, never written there as they come."""
    http, settings = served
    before = len(AuditLog(settings.resolved_journal_url()).entries())
    refused = await http.post("/decode", json={"payloads": [plain("x")]}, headers={"X-Namespace": namespace})
    assert refused.status_code == 422 and "X-Namespace" in refused.json()["detail"], refused.text
    assert namespace.decode("latin-1") not in refused.text
    assert len(AuditLog(settings.resolved_journal_url()).entries()) == before
    assert (await http.post("/decode", json={"payloads": []}, headers={"X-Namespace": "prod-eu.1"})).status_code == 200
