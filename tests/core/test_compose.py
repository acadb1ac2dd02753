"""Static checks of docker-compose.yml and the Dockerfile (no Docker engine is needed:
the compose file is parsed as YAML and checked for what a deployment relies on)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from starter.devserver import attribute_type_name
from workflows.options import SEARCH_ATTRIBUTES

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "Dockerfile"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    return compose["services"]


def _env(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as a dict, whether written as a mapping or a KEY=VALUE list."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {key: "" if value is None else str(value) for key, value in env.items()}


def _depends_on(service: dict[str, Any]) -> set[str]:
    deps = service.get("depends_on") or []
    return set(deps) if isinstance(deps, list) else set(deps)


def _command_text(service: dict[str, Any]) -> str:
    parts = []
    for key in ("entrypoint", "command"):
        value = service.get(key)
        if value:
            parts.append(" ".join(value) if isinstance(value, list) else str(value))
    return "\n".join(parts)


def _ports(service: dict[str, Any]) -> list[str]:
    return [str(p) if not isinstance(p, dict) else f"{p.get('published')}:{p.get('target')}"
            for p in service.get("ports") or []]


def test_expected_services_exist(services: dict[str, Any]) -> None:
    assert {"postgresql", "temporal", "temporal-ui", "worker", "api"} <= set(services)


def test_postgresql_keeps_data_in_a_volume(compose: dict[str, Any], services: dict[str, Any]) -> None:
    pg = services["postgresql"]
    assert pg["image"].startswith("postgres:16")
    volumes = [str(v).split(":")[0] for v in pg.get("volumes") or []]
    assert any(v in (compose.get("volumes") or {}) for v in volumes), "postgresql data must live in a named volume"


def test_temporal_uses_auto_setup_on_postgresql(services: dict[str, Any]) -> None:
    temporal = services["temporal"]
    assert temporal["image"].startswith("temporalio/auto-setup:")
    env = _env(temporal)
    assert env["DB"] == "postgres12"
    assert env["POSTGRES_SEEDS"] == "postgresql"
    assert "postgresql" in _depends_on(temporal)


def test_ui_points_at_temporal_and_is_published_on_8233(services: dict[str, Any]) -> None:
    ui = services["temporal-ui"]
    assert ui["image"].startswith("temporalio/ui:")
    assert _env(ui)["TEMPORAL_ADDRESS"] == "temporal:7233"
    assert any(p.startswith("8233:") for p in _ports(ui)), _ports(ui)


@pytest.mark.parametrize("name", ["worker", "api"])
def test_app_services_build_from_the_dockerfile_and_reach_temporal_and_postgresql(
        services: dict[str, Any], name: str) -> None:
    service = services[name]
    build = service["build"]
    if isinstance(build, str):
        assert build == "."
    else:
        assert build.get("context", ".") == "."
        assert build.get("dockerfile", "Dockerfile") == "Dockerfile"
    env = _env(service)
    assert env["STATEKEEPER_TEMPORAL_ADDRESS"] == "temporal:7233"
    assert re.match(r"postgresql(\+psycopg)?://[^@]+@postgresql:5432/\w+$", env["STATEKEEPER_DATABASE_URL"])
    assert env["ANTHROPIC_API_KEY"] == "${ANTHROPIC_API_KEY:-}"  # passthrough, empty means offline model


def test_commands_of_worker_and_api(services: dict[str, Any]) -> None:
    assert _command_text(services["worker"]) == "statekeeper worker"
    api = _command_text(services["api"])
    assert api.startswith("uvicorn starter.api:app") and "--host 0.0.0.0" in api and "--port 8000" in api
    assert any(p.startswith("8000:") for p in _ports(services["api"]))


def test_all_images_are_pinned(services: dict[str, Any]) -> None:
    for name, service in services.items():
        image = service.get("image")
        if image is None:
            assert "build" in service, f"{name} has neither image nor build"
            continue
        repo, _, tag = image.rpartition(":")
        assert repo and "/" not in tag, f"{name}: image {image!r} has no tag"
        assert tag and tag != "latest", f"{name}: image {image!r} is not pinned"


def test_search_attributes_are_registered(services: dict[str, Any]) -> None:
    # The names the workflows upsert must be the ones some service registers, with their type.
    types = {key.name: attribute_type_name(key) for key in SEARCH_ATTRIBUTES}
    assert set(types) == {"CustomerId", "OrderIds", "Step", "Status", "PendingApproval", "Tenant"}
    commands = [_command_text(s) for s in services.values()]
    for name, kind in types.items():
        assert any(re.search(rf"search-attribute create\b[^\n]*--name {name}\b[^\n]*--type {kind}\b", c)
                   for c in commands), f"no service registers {name} as {kind}"
    setup = [n for n, s in services.items() if "search-attribute create" in _command_text(s)]
    for name in setup:
        assert "temporal" in _depends_on(services[name])
        assert _env(services[name]).get("TEMPORAL_ADDRESS") == "temporal:7233"
    # The app waits for the registration, or its first workflow tasks would fail.
    for app in ("worker", "api"):
        deps = services[app].get("depends_on") or {}
        assert any(deps.get(n, {}).get("condition") == "service_completed_successfully" for n in setup), app


def test_dockerfile_installs_the_project() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", text, re.M)
    assert re.search(r"^RUN pip install \.", text, re.M)
    # Everything pyproject.toml packages must be in the build context the Dockerfile copies.
    tool = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    needed = {"pyproject.toml"} | {f"{m}.py" for m in tool.get("py-modules", [])}
    needed |= {f"{p.split('.')[0]}/" for p in tool.get("packages", [])}
    copied = " ".join(line for line in text.splitlines() if line.startswith("COPY "))
    for path in sorted(needed):
        assert path in copied, f"Dockerfile does not copy {path}"
