"""An empty id (an unset shell variable: ``statekeeper resolve "$CID" ...``) is refused by
every command that takes one, status 2 and one line, before anything is asked. A new user
found ``backtest --conversation ""`` re-asking every conversation's calls, ``link --customer
""`` printing the link of the pseudonym of "", ``resolve ""`` answering "conversation  does
not exist" after connecting, and ``replay-check ""``/``resume ""`` a report on "" (``state``,
``transcript`` and ``decisions`` refused it already)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from starter.cli.app import app


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
