"""``statekeeper memory show`` and ``forget`` on a real journal database (typer's runner: the real
commands, their exit codes and streams): the facts with their source and age, the id to forget
by, a second forget refused, a bad customer id refused before anything, and each read and change
in the audit log by pseudonym."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from activities.store.audit import AuditLog
from activities.store.memory import MemoryStore
from settings import Settings
from starter.cli.app import app
from tests.memory_fixtures import remember
from workflows.domain.memory import FactKind
from workflows.domain.pseudonym import customer_pseudonym


def _run(data_dir, *args):
    return CliRunner().invoke(app, ["memory", *args], env={"STATEKEEPER_DATA_DIR": str(data_dir),
                                                            "STATEKEEPER_PSEUDONYM_KEY": None, "COLUMNS": "200"})


def test_show_then_forget_a_fact_and_the_audit_log(tmp_path):
    settings = Settings(data_dir=tmp_path)
    pseudonym = customer_pseudonym("raj_1", settings.pseudonym_secret())
    store = MemoryStore(settings.resolved_journal_url())
    fact = remember(store, pseudonym, FactKind.DELIVERY_INSTRUCTIONS, "ring twice")
    remember(store, pseudonym, FactKind.PREFERRED_LANGUAGE, "Spanish")

    shown = _run(tmp_path, "show", "raj_1")
    assert shown.exit_code == 0, shown.output
    assert "ring twice" in shown.output and "Spanish" in shown.output and fact.fact_id in shown.output
    assert "c-1, turn 2" in shown.output and "today" in shown.output
    as_json = json.loads(_run(tmp_path, "show", "raj_1", "--json").output)
    assert [i["value"] for i in as_json["items"]] == ["ring twice", "Spanish"]

    assert _run(tmp_path, "forget", "raj_1", fact.fact_id).exit_code == 0
    again = _run(tmp_path, "forget", "raj_1", fact.fact_id)
    assert again.exit_code == 1 and "no remembered fact" in again.output
    assert [i["value"] for i in json.loads(_run(tmp_path, "show", "raj_1", "--json").output)["items"]] == ["Spanish"]
    actions = [e.action for e in AuditLog(settings.resolved_journal_url()).entries(subject=pseudonym)]
    assert actions.count("read_memory") == 3 and actions.count("forget_memory") == 1


def test_a_bad_customer_id_is_refused_and_nothing_changes(tmp_path):
    settings = Settings(data_dir=tmp_path)
    store = MemoryStore(settings.resolved_journal_url())
    remember(store, customer_pseudonym("raj_1", settings.pseudonym_secret()), FactKind.PREFERRED_LANGUAGE, "Spanish")
    for bad in ("raj 1", "r" * 200, ""):
        result = _run(tmp_path, "show", bad)
        assert result.exit_code == 2 and "customer id" in result.output, result.output
    assert "Spanish" in _run(tmp_path, "show", "raj_1").output


def test_nothing_remembered_says_so(tmp_path):
    Settings(data_dir=tmp_path).pseudonym_secret()
    result = _run(tmp_path, "show", "nobody_1")
    assert result.exit_code == 0 and "nothing is remembered" in result.output
