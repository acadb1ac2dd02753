"""``statekeeper dev``'s external services (``starter.dev.services.external_systems``): served on
consecutive ports with a SQLite file each in the data directory, their URLs in the settings
the worker gets; configured URLs are used as they are; a taken port is reported, not fatal."""

from __future__ import annotations

import socket

import httpx
import pytest

from settings import Settings
from starter.dev.services import external_systems
from systems.fleet import SERVICES, app_from_environment
from systems.service_kit.server import free_port


def _ports_free_from(start: int) -> bool:
    for port in range(start, start + 3):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


async def test_dev_serves_the_three_services_on_their_ports(tmp_path):
    base = free_port()
    while not _ports_free_from(base):
        base = free_port()
    settings = Settings(data_dir=tmp_path, services_port=base)
    async with external_systems(settings) as (served, line):
        assert served.payments_url == f"http://127.0.0.1:{base}"
        assert served.email_url == f"http://127.0.0.1:{base + 1}" and served.ticketing_url.endswith(str(base + 2))
        assert httpx.get(f"{served.payments_url}/operations/none").status_code == 404
        assert httpx.get(f"{served.email_url}/messages", params={"reference": "x"}).json() == []
        assert "payments http://127.0.0.1" in line
    assert sorted(p.name for p in tmp_path.glob("*.sqlite")) == ["email.sqlite", "payments.sqlite",
                                                                  "ticketing.sqlite"]


async def test_configured_urls_are_used_as_they_are(tmp_path):
    settings = Settings(data_dir=tmp_path, payments_url="http://payments.internal")
    async with external_systems(settings) as (served, _line):
        assert served is settings


async def test_a_taken_port_is_reported(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        async with external_systems(Settings(data_dir=tmp_path, services_port=port)) as (served, line):
            assert served.payments_url is None and "not served" in line


def test_the_compose_demo_profile_serves_each_service_from_its_environment(tmp_path, monkeypatch):
    """``uvicorn --factory systems.fleet:app_from_environment``, as docker-compose.yml's demo
    profile runs each service: the one ``SYSTEMS_SERVICE`` names, on ``SYSTEMS_DATABASE_URL``."""
    for name in SERVICES:
        monkeypatch.setenv("SYSTEMS_SERVICE", name)
        monkeypatch.setenv("SYSTEMS_DATABASE_URL", f"sqlite:///{tmp_path / name}.sqlite")
        app = app_from_environment()
        assert app.title == name and (tmp_path / f"{name}.sqlite").exists()  # its tables made
        app.state.effects.engine.dispose()
    monkeypatch.setenv("SYSTEMS_SERVICE", "ledger")
    with pytest.raises(ValueError, match="SYSTEMS_SERVICE must be one of payments, email, ticketing"):
        app_from_environment()
    monkeypatch.setenv("SYSTEMS_SERVICE", "email")
    monkeypatch.setenv("SYSTEMS_DATABASE_URL", " ")
    with pytest.raises(ValueError, match="SYSTEMS_DATABASE_URL"):
        app_from_environment()
