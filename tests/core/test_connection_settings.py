"""Settings of a secured Temporal (TLS, mTLS, API key) and of telemetry map to the arguments
``starter.runtime.connection.connect`` passes to ``Client.connect``: what the worker, the API and
the CLI use to reach Temporal Cloud or a secured cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.service import TLSConfig

from settings import Settings
from starter.runtime.connection import connect_options, tls_config
from starter.runtime.preflight import StartupRefused


def pem(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.write_bytes(f"-----BEGIN {name}-----\n".encode())
    return path


def test_plain_by_default(tmp_path: Path, monkeypatch):
    for name in ("TLS", "TLS_SERVER_CA_CERT", "TLS_CLIENT_CERT", "TLS_CLIENT_KEY", "TLS_SERVER_NAME", "API_KEY"):
        monkeypatch.delenv(f"STATEKEEPER_TEMPORAL_{name}", raising=False)
    options = connect_options(Settings(data_dir=tmp_path))
    assert options["tls"] is None and "api_key" not in options and "runtime" not in options
    assert options["namespace"] == "default"
    assert [type(i) for i in options["interceptors"]] == [TracingInterceptor]


def test_mtls_reads_the_three_files_and_the_server_name(tmp_path: Path):
    settings = Settings(data_dir=tmp_path, temporal_tls_server_ca_cert=pem(tmp_path, "CA"),
                        temporal_tls_client_cert=pem(tmp_path, "CERT"), temporal_tls_client_key=pem(tmp_path, "KEY"),
                        temporal_tls_server_name="ns.acct.tmprl.cloud", temporal_namespace="ns.acct")
    tls = connect_options(settings)["tls"]
    assert isinstance(tls, TLSConfig)
    assert tls.server_root_ca_cert == b"-----BEGIN CA-----\n"
    assert tls.client_cert == b"-----BEGIN CERT-----\n" and tls.client_private_key == b"-----BEGIN KEY-----\n"
    assert tls.domain == "ns.acct.tmprl.cloud"
    assert connect_options(settings)["namespace"] == "ns.acct"


def test_tls_alone_uses_the_system_roots(tmp_path: Path):
    assert tls_config(Settings(data_dir=tmp_path, temporal_tls=True)) is True
    only_name = tls_config(Settings(data_dir=tmp_path, temporal_tls_server_name="temporal.internal"))
    assert isinstance(only_name, TLSConfig) and only_name.server_root_ca_cert is None and only_name.client_cert is None


def test_an_api_key_is_a_secret_passed_as_the_api_key(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("STATEKEEPER_TEMPORAL_API_KEY", "cloud-key-123")
    settings = Settings(data_dir=tmp_path)
    assert isinstance(settings.temporal_api_key, SecretStr) and "cloud-key-123" not in repr(settings)
    options = connect_options(settings)
    assert options["api_key"] == "cloud-key-123"
    assert options["tls"] is None  # the SDK turns TLS on for an API key


def test_settings_from_the_environment_and_empty_means_unset(tmp_path: Path, monkeypatch):
    ca = pem(tmp_path, "CA")
    monkeypatch.setenv("STATEKEEPER_TEMPORAL_TLS_SERVER_CA_CERT", str(ca))
    monkeypatch.setenv("STATEKEEPER_TEMPORAL_TLS_CLIENT_CERT", "")  # compose's ${VAR:-}
    monkeypatch.setenv("STATEKEEPER_TEMPORAL_API_KEY", "")
    monkeypatch.setenv("STATEKEEPER_OTEL_EXPORTER_OTLP_ENDPOINT", "")
    settings = Settings(data_dir=tmp_path)
    assert settings.temporal_tls_server_ca_cert == ca and settings.temporal_tls_client_cert is None
    assert settings.temporal_api_key is None and settings.otel_exporter_otlp_endpoint is None
    assert tls_config(settings).server_root_ca_cert == b"-----BEGIN CA-----\n"


def test_a_client_cert_without_its_key_is_refused(tmp_path: Path):
    with pytest.raises(StartupRefused, match="both STATEKEEPER_TEMPORAL_TLS_CLIENT_CERT and"):
        tls_config(Settings(data_dir=tmp_path, temporal_tls_client_cert=pem(tmp_path, "CERT")))
    with pytest.raises(StartupRefused, match="both"):
        tls_config(Settings(data_dir=tmp_path, temporal_tls_client_key=pem(tmp_path, "KEY")))


def test_an_unreadable_file_is_refused_naming_the_setting(tmp_path: Path):
    with pytest.raises(StartupRefused, match="cannot read STATEKEEPER_TEMPORAL_TLS_SERVER_CA_CERT"):
        tls_config(Settings(data_dir=tmp_path, temporal_tls_server_ca_cert=tmp_path / "missing.pem"))


def test_a_file_that_is_not_pem_is_refused_naming_the_setting_not_as_unreachable(tmp_path: Path):
    der = tmp_path / "ca.der"
    der.write_bytes(b"\x30\x82\x03\x0b")  # a DER certificate's first bytes
    settings = Settings(data_dir=tmp_path, temporal_tls_server_ca_cert=der)
    with pytest.raises(StartupRefused, match="STATEKEEPER_TEMPORAL_TLS_SERVER_CA_CERT .* is not a PEM file"):
        tls_config(settings)


def test_metrics_settings_give_one_runtime_per_configuration(tmp_path: Path):
    from starter.runtime.telemetry import telemetry_runtime

    settings = Settings(data_dir=tmp_path, metrics_otlp_endpoint="http://127.0.0.1:4317")
    runtime = connect_options(settings)["runtime"]
    assert runtime is telemetry_runtime(settings)  # made once: a runtime owns its exporter
    assert telemetry_runtime(Settings(data_dir=tmp_path)) is None


def test_both_metrics_exporters_set_says_which_one_is_used(tmp_path: Path, caplog):
    """The SDK's runtime takes one metrics exporter: with both set, a warning says OTLP is not pushed, never silence."""
    import socket

    from starter.runtime.telemetry import telemetry_runtime

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = Settings(data_dir=tmp_path, metrics_prometheus_address=f"127.0.0.1:{port}",
                        metrics_otlp_endpoint="http://127.0.0.1:4317")
    with caplog.at_level("WARNING", logger="statekeeper.telemetry"):
        assert telemetry_runtime(settings) is not None
    assert "not pushed over OTLP; set one" in caplog.text


def test_activity_slots_fit_what_activities_wait_for():
    """16 offline (the stand-in model answers on the worker's CPU), 64 with a provider (its
    calls wait on the network); a configured number wins either way."""
    from settings import OFFLINE_ACTIVITY_SLOTS, PROVIDER_ACTIVITY_SLOTS

    assert Settings(_env_file=None, anthropic_api_key=None).activity_slots() == OFFLINE_ACTIVITY_SLOTS == 16
    assert Settings(_env_file=None, anthropic_api_key="k").activity_slots() == PROVIDER_ACTIVITY_SLOTS == 64
    assert Settings(_env_file=None, anthropic_api_key=None, max_concurrent_activities=40).activity_slots() == 40
    assert Settings(_env_file=None, anthropic_api_key="k", max_concurrent_activities=8).activity_slots() == 8


def test_model_calls_setting_reaches_the_conversations_input_and_refuses_other_values(tmp_path: Path, monkeypatch):
    """``STATEKEEPER_MODEL_CALLS=local`` makes the client start conversations with
    ``local_model_calls`` (the workflow's input, not the worker's settings); anything but
    ``activity`` or ``local`` is refused naming the setting."""
    import pydantic

    from starter.ops.bootstrap import client_for

    monkeypatch.setenv("STATEKEEPER_MODEL_CALLS", "local")
    assert client_for(object(), Settings(_env_file=None, data_dir=tmp_path))._local_model_calls is True
    monkeypatch.setenv("STATEKEEPER_MODEL_CALLS", "activity")
    assert client_for(object(), Settings(_env_file=None, data_dir=tmp_path))._local_model_calls is False
    monkeypatch.setenv("STATEKEEPER_MODEL_CALLS", "remote")
    with pytest.raises(pydantic.ValidationError, match="model_calls"):
        Settings(_env_file=None, data_dir=tmp_path)


def test_sticky_schedule_to_start_is_a_setting_bounded_above_zero(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("STATEKEEPER_STICKY_SCHEDULE_TO_START_SECONDS", "2.5")
    assert Settings(_env_file=None, data_dir=tmp_path).sticky_schedule_to_start_seconds == 2.5
    monkeypatch.setenv("STATEKEEPER_STICKY_SCHEDULE_TO_START_SECONDS", "0")
    import pydantic

    with pytest.raises(pydantic.ValidationError, match="sticky_schedule_to_start_seconds"):
        Settings(_env_file=None, data_dir=tmp_path)


def test_memory_setting_reaches_the_conversations_input(tmp_path: Path, monkeypatch):
    """``STATEKEEPER_MEMORY_ENABLED=false`` makes the client start conversations with memory off
    (``SupportInput.memory``: no read, the prompt without the memory tools); on by default."""
    from starter.ops.bootstrap import client_for

    assert client_for(object(), Settings(_env_file=None, data_dir=tmp_path))._memory is True
    monkeypatch.setenv("STATEKEEPER_MEMORY_ENABLED", "false")
    assert client_for(object(), Settings(_env_file=None, data_dir=tmp_path))._memory is False
