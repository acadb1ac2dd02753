"""What the ``statekeeper`` CLI prints, whole at a terminal's width:

- ``statekeeper --help`` lists each command with one sentence, not its docstring's line breaks
  (typer's rich mode keeps them, which would break "backtest", "replay-check", "resume",
  "resolve" and "state" mid-sentence);
- ``statekeeper chat`` shows a reply's text as it is: rich would read bracketed text as markup
  and drop an exchange's new variant options ("-> 2880340443 [color white, ...] (137.22)") or a
  refusal's "[rule]";
- ``statekeeper decisions``' table says once, in its caption, what is the same in every row and
  cuts nothing to "…" at 80 columns; an empty decision log is one line naming the filters.
"""

from __future__ import annotations

from types import SimpleNamespace

from rich.console import Console
from typer.testing import CliRunner

from starter.cli.app import app
from starter.cli.journal import decision_table, no_decisions
from starter.cli.support import agent_line


# --- The command list ---

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


# --- Chat replies ---

def _shown(markup: str) -> str:
    console = Console(width=300, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(markup)
    return console.export_text().rstrip("\n")


def test_a_reply_with_brackets_is_shown_whole():
    text = ("Please confirm: Exchange in order #W7273336: Gaming Mouse 8214883393 (150.58) -> 2880340443 "
            "[color white, sensor type optical, connectivity wired] (137.22). Reply 'yes' to proceed.")
    assert _shown(agent_line(text)) == f"agent> {text}"
    assert _shown(agent_line("[approval-threshold] 826.70 is above [/] [red]")) == (
        "agent> [approval-threshold] 826.70 is above [/] [red]")


# --- The decisions table ---

def _row(conversation: str, call: int, tool: str) -> SimpleNamespace:
    return SimpleNamespace(conversation_id=conversation, turn=1, call_seq=call, prompt_version="2026-12-01",
                           model="statekeeper-offline-stand-in", proposal={"kind": "tool_call", "tool": {"name": tool}},
                           stop_reason="tool_use", verdict="read_ran", rule=None, outcome="applied",
                           input_tokens=71, output_tokens=30, cache_read_input_tokens=3179,
                           cache_creation_input_tokens=155)


def _render(rows: list, width: int) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(decision_table(rows))
    return console.export_text()


def test_one_conversation_at_80_columns_cuts_nothing_and_names_the_constants_once():
    rows = [_row("desk-43", 1, "find_user_id_by_email"), _row("desk-43", 2, "get_order_details")]
    text = _render(rows, 80)
    assert "…" not in text
    assert "conversation desk-43" in " ".join(text.split()) and "statekeeper-offline-stand-in" in text
    header = text.splitlines()[1:6]
    assert not any("conversation" in line for line in header)  # a column no more: in the caption
    assert "find_us" in text and "3179/1" in text  # folded, not cut


def test_several_conversations_keep_their_column():
    text = _render([_row("desk-43", 1, "reply"), _row("desk-44", 1, "reply")], 200)
    assert "conversation" in text.splitlines()[2] and "desk-44" in text
    assert "prompt 2026-12-01" in text  # still the same in every row


def test_nothing_to_show_is_one_line_naming_the_filters():
    """An empty decision log (a mistyped conversation id, an unknown rule) is one line naming the
    filters, not an empty twelve-column table whose headers, at 80 columns, read "conv ersa tion"."""
    assert no_decisions("nope", None, None, None) == "no model calls in the decision log for conversation nope"
    assert no_decisions(None, "raj_sanchez_2970", "check-status", "2026-11-23") == (
        "no model calls in the decision log for that customer, rule check-status since 2026-11-23")
    # --since alone: "... decision log since 2099-01-01", not "... decision log for since ..."
    assert no_decisions(None, None, None, "2099-01-01") == "no model calls in the decision log since 2099-01-01"
    assert no_decisions(None, None, None, None) == "no model calls in the decision log"
