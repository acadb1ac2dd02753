"""A setting a command cannot use is one line naming it and status 2 (``starter.cli.refusals.
command_settings``), also for the settings that were checked only later: the approval policy's
bounds (a negative STATEKEEPER_APPROVAL_THRESHOLD ended ``statekeeper state`` with a pydantic
``ValidationError`` traceback where the client was made) and JSON that does not parse
(STATEKEEPER_STORE_TENANTS=notjson ended every command with pydantic-settings' ``SettingsError``
traceback, 'error parsing value for field "store_tenants" from source "EnvSettingsSource"')."""

from __future__ import annotations

import pytest
import typer

from starter.cli.refusals import command_settings
from workflows.domain.policy.approvals import ApprovalPolicy


@pytest.mark.parametrize("name, value", [
    ("STATEKEEPER_APPROVAL_THRESHOLD", "-5"),
    ("STATEKEEPER_APPROVAL_TIMEOUT_SECONDS", "0"),
    ("STATEKEEPER_APPROVAL_TIMEOUT_SECONDS", "-1"),
    ("STATEKEEPER_APPROVAL_TIMEOUT_SECONDS", str(400 * 86400)),
    ("STATEKEEPER_STORE_TENANTS", "notjson"),
    # accepted before, then every refund child failed its workflow task ("Activity must have
    # start_to_close_timeout or schedule_to_close_timeout") and `chat` waited 120 s for nothing
    ("STATEKEEPER_WRITE_TIMEOUT_SECONDS", "0"),
    ("STATEKEEPER_WRITE_TIMEOUT_SECONDS", "-3"),
    # accepted before (settings.types): each ended a command or a worker with a traceback
    # (ValueError, OverflowError, RPCError, TypeError), or hung every conversation
    *[(f"STATEKEEPER_{name}", value) for name in ("RPC_TIMEOUT_SECONDS", "UPDATE_ACCEPT_SECONDS",
                                                  "REPLY_TIMEOUT_SECONDS", "SERVICES_TIMEOUT_SECONDS",
                                                  "MODEL_TIMEOUT_SECONDS", "WRITE_TIMEOUT_SECONDS")
      for value in ("nan", "inf", "1e308", "-1")],
    ("STATEKEEPER_RPC_TIMEOUT_SECONDS", "0"),
    ("STATEKEEPER_TASK_QUEUE", ""),
    ("STATEKEEPER_TASK_QUEUE", " "),
    ("STATEKEEPER_TEMPORAL_NAMESPACE", ""),
    ("STATEKEEPER_MODEL", " "),
    ("STATEKEEPER_TEMPORAL_ADDRESS", ""),
    ("STATEKEEPER_TEMPORAL_ADDRESS", "127.0.0.1"),
    ("STATEKEEPER_TEMPORAL_ADDRESS", "127.0.0.1:0"),
    ("STATEKEEPER_TEMPORAL_ADDRESS", "\u00e9:\u0661"),
    ("STATEKEEPER_MAX_CONCURRENT_WORKFLOW_TASKS", "0"),
    ("STATEKEEPER_MAX_CONCURRENT_WORKFLOW_TASKS", "99999999999999999999"),
    ("STATEKEEPER_MAX_CONCURRENT_ACTIVITIES", "99999999999999999999"),
    ("STATEKEEPER_MAX_CACHED_WORKFLOWS", "99999999999999999999"),
    ("STATEKEEPER_MODEL_MAX_TOKENS", "0"),
    ("STATEKEEPER_MODEL_MAX_TOKENS", "-1"),
    ("STATEKEEPER_DEFAULT_TENANT", ""),
    ("STATEKEEPER_DEFAULT_TENANT", "ACME"),
    # a worker's ValueError traceback ("Invalid Prometheus address", "Invalid OTel URL"), or
    # a URL every refund, email or span then failed to reach
    ("STATEKEEPER_METRICS_PROMETHEUS_ADDRESS", "nonsense"),
    ("STATEKEEPER_METRICS_OTLP_ENDPOINT", "nonsense"),
    ("STATEKEEPER_OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://collector"),
    ("STATEKEEPER_PAYMENTS_URL", "payments:8301"),
    ("STATEKEEPER_EMAIL_URL", "http://email:port"),
    ("STATEKEEPER_TICKETING_URL", "http://"),
    # a blank secret: " " was used as the pseudonyms' HMAC key, "" a worker traceback
    ("STATEKEEPER_PSEUDONYM_KEY", ""),
    ("STATEKEEPER_PSEUDONYM_KEY", "   "),
    ("STATEKEEPER_API_KEY_SECRET", " "),
    # a worker's ArgumentError, NoSuchModuleError or ModuleNotFoundError ('psycopg2') traceback
    ("STATEKEEPER_DATABASE_URL", "statekeeper.sqlite"),
    ("STATEKEEPER_DATABASE_URL", "postgres+psycopg://db/statekeeper"),
    ("STATEKEEPER_DATABASE_URL", "postgresql://db/statekeeper"),
    ("STATEKEEPER_JOURNAL_URL", "postgresql+psycopg://db:port/journal"),
    ("STATEKEEPER_JOURNAL_URL", "mysql://db/journal"),
    # taken as is before: every model call then failed as a connection error
    ("STATEKEEPER_ANTHROPIC_BASE_URL", "api.anthropic.com"),
    # a blank API host bound every interface (uvicorn's "http://:8000")
    ("STATEKEEPER_API_HOST", ""),
    ("STATEKEEPER_API_HOST", " "),
    # accepted before: a codec server no browser could call (CORS matches whole origins)
    ("STATEKEEPER_CODEC_CORS_ORIGINS", "localhost:8233"),
    ("STATEKEEPER_CODEC_CORS_ORIGINS", "*"),
    ("STATEKEEPER_CODEC_CORS_ORIGINS", "http://localhost:8233,https://ui.example.com/temporal"),
    # taken before: spans and metrics exported under a blank service name
    ("STATEKEEPER_OTEL_SERVICE_NAME", ""),
    ("STATEKEEPER_OTEL_SERVICE_NAME", " "),
    # a blank path was the working directory: databases and key files written there
    ("STATEKEEPER_DATA_DIR", ""),
    ("STATEKEEPER_DEV_STATE_FILE", " "),
])
def test_an_unusable_setting_is_one_line_naming_it(monkeypatch, capsys, tmp_path, name, value):
    monkeypatch.setenv("STATEKEEPER_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("STATEKEEPER_DEV_STATE_FILE", str(tmp_path / "dev.json"))
    monkeypatch.setenv(name, value)
    with pytest.raises(typer.Exit) as exited:
        command_settings()
    assert exited.value.exit_code == 2
    said = " ".join(capsys.readouterr().err.split())
    assert said.startswith(f"statekeeper: invalid setting: {name}: "), said
    assert "Error" not in said and "pydantic" not in said and "EnvSettingsSource" not in said, said


def test_a_store_tenants_value_that_is_not_json_is_shown_its_shape(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("STATEKEEPER_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("STATEKEEPER_STORE_TENANTS", "acme-eu=acme")
    with pytest.raises(typer.Exit):
        command_settings()
    assert 'not valid JSON (e.g. {"acme-eu": "acme"})' in capsys.readouterr().err


def test_an_entry_of_a_json_setting_is_named_inside_the_variable(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("STATEKEEPER_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("STATEKEEPER_DEV_STATE_FILE", str(tmp_path / "dev.json"))
    monkeypatch.setenv("STATEKEEPER_STORE_TENANTS", '{"acme-eu": "Acme EU"}')
    with pytest.raises(typer.Exit):
        command_settings()
    said = " ".join(capsys.readouterr().err.split())
    assert "STATEKEEPER_STORE_TENANTS (entry acme-eu): a tenant is 1 to 64 lower-case" in said, said
    assert "Value error" not in said, said


def test_the_bounded_settings_still_take_ordinary_values(monkeypatch, tmp_path):
    monkeypatch.setenv("STATEKEEPER_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("STATEKEEPER_DEV_STATE_FILE", str(tmp_path / "dev.json"))
    for name, value in (("TEMPORAL_ADDRESS", "[::1]:7233"), ("RPC_TIMEOUT_SECONDS", "0.5"), ("TASK_QUEUE", "q 1"),
                        ("MAX_CACHED_WORKFLOWS", "0"), ("DEFAULT_TENANT", "acme-eu"), ("MODEL_MAX_TOKENS", "64000"),
                        ("METRICS_PROMETHEUS_ADDRESS", "0.0.0.0:9464"), ("METRICS_OTLP_ENDPOINT", ""),
                        ("PAYMENTS_URL", "http://payments.internal:8301/"), ("JOURNAL_URL", "sqlite:////tmp/j.sqlite"),
                        ("DATABASE_URL", "postgresql+psycopg://u:p@db:5432/sor"), ("ANTHROPIC_BASE_URL", ""),
                        ("API_HOST", "::1"), ("CODEC_CORS_ORIGINS", "https://ui.example.com, http://[::1]:8233/,")):
        monkeypatch.setenv(f"STATEKEEPER_{name}", value)
    settings = command_settings()
    assert (settings.temporal_address, settings.rpc_timeout_seconds, settings.task_queue) == ("[::1]:7233", 0.5, "q 1")
    assert (settings.max_cached_workflows, settings.default_tenant, settings.model_max_tokens) == (0, "acme-eu", 64000)
    assert (settings.metrics_prometheus_address, settings.metrics_otlp_endpoint) == ("0.0.0.0:9464", None)
    assert settings.payments_url == "http://payments.internal:8301/"
    assert (settings.anthropic_base_url, settings.api_host) == (None, "::1")
    assert settings.codec_cors_origins == "https://ui.example.com, http://[::1]:8233/,"
    assert (settings.journal_url, settings.database_url) == ("sqlite:////tmp/j.sqlite", "postgresql+psycopg://u:p@db:5432/sor")


def test_the_approval_settings_accept_what_the_approval_policy_accepts(monkeypatch, tmp_path):
    monkeypatch.setenv("STATEKEEPER_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("STATEKEEPER_DEV_STATE_FILE", str(tmp_path / "dev.json"))
    monkeypatch.setenv("STATEKEEPER_APPROVAL_THRESHOLD", "0")
    monkeypatch.setenv("STATEKEEPER_APPROVAL_TIMEOUT_SECONDS", "60")
    settings = command_settings()
    policy = ApprovalPolicy(threshold=settings.approval_threshold, timeout_seconds=settings.approval_timeout_seconds)
    assert (policy.threshold, policy.timeout_seconds) == (0, 60)


def test_a_refused_database_url_is_not_echoed(monkeypatch, capsys, tmp_path):
    # the URL holds the database password: the refusal names the setting, never its value
    monkeypatch.setenv("STATEKEEPER_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("STATEKEEPER_DEV_STATE_FILE", str(tmp_path / "dev.json"))
    monkeypatch.setenv("STATEKEEPER_DATABASE_URL", "postgresql://sor:hunter2-secret@db/sor")
    with pytest.raises(typer.Exit):
        command_settings()
    said = " ".join(capsys.readouterr().err.split())
    assert "STATEKEEPER_DATABASE_URL: its database driver (postgresql) is not installed" in said, said
    assert "hunter2" not in said, said


@pytest.mark.parametrize("name", ["ANTHROPIC_API_KEY", "STATEKEEPER_ANTHROPIC_API_KEY"])
@pytest.mark.parametrize("value", ["", " ", "\t"])
def test_a_blank_model_api_key_is_the_offline_model(monkeypatch, tmp_path, name, value):
    # " " was taken for a provider's key: the worker said "offline model: False" and sent
    # every model call with a blank key; "" (compose's ${ANTHROPIC_API_KEY:-}) was offline already
    monkeypatch.setenv("STATEKEEPER_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("STATEKEEPER_DEV_STATE_FILE", str(tmp_path / "dev.json"))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("STATEKEEPER_ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv(name, value)
    settings = command_settings()
    assert settings.anthropic_api_key is None and settings.offline
