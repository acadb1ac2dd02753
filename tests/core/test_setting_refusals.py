"""A setting a command cannot use is one line naming it and status 2 (``starter.cli_refusals.
command_settings``), also for the settings that were checked only later: the approval policy's
bounds (a negative STATEKEEPER_APPROVAL_THRESHOLD ended ``statekeeper state`` with a pydantic
``ValidationError`` traceback where the client was made) and JSON that does not parse
(STATEKEEPER_STORE_TENANTS=notjson ended every command with pydantic-settings' ``SettingsError``
traceback, 'error parsing value for field "store_tenants" from source "EnvSettingsSource"')."""

from __future__ import annotations

import pytest
import typer

from starter.cli_refusals import command_settings
from workflows.approvals import ApprovalPolicy


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


def test_the_approval_settings_accept_what_the_approval_policy_accepts(monkeypatch, tmp_path):
    monkeypatch.setenv("STATEKEEPER_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("STATEKEEPER_DEV_STATE_FILE", str(tmp_path / "dev.json"))
    monkeypatch.setenv("STATEKEEPER_APPROVAL_THRESHOLD", "0")
    monkeypatch.setenv("STATEKEEPER_APPROVAL_TIMEOUT_SECONDS", "60")
    settings = command_settings()
    policy = ApprovalPolicy(threshold=settings.approval_threshold, timeout_seconds=settings.approval_timeout_seconds)
    assert (policy.threshold, policy.timeout_seconds) == (0, 60)
