"""``statekeeper --help`` lists each command with one sentence, not its docstring's line
breaks: typer's rich mode kept them, so the list broke "backtest", "replay-check", "resume",
"resolve" and "state" mid-sentence ("... validate the answers" / "with the current policy")."""

from __future__ import annotations

from typer.testing import CliRunner

from starter.cli.app import app


def _commands(typer_app):
    for info in typer_app.registered_commands:
        yield info
    for group in typer_app.registered_groups:
        yield from _commands(group.typer_instance)


def test_every_listed_summary_is_one_line():
    infos = list(_commands(app))
    assert len(infos) > 20
    for info in infos:
        summary = info.short_help or info.help
        assert summary and "\n" not in summary, info.callback


def test_the_list_joins_the_backtest_sentence():
    listed = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "300", "NO_COLOR": "1"}).output
    assert "validate the answers with the current policy, and compare; executes nothing." in listed
