"""`statekeeper decisions`' table at a terminal's width: what is the same in every row is said
once in the caption, and nothing is cut to "…" (at 80 columns all twelve columns showed
"con…", "pr…", "ve…": a new user's report)."""

from __future__ import annotations

from types import SimpleNamespace

from rich.console import Console

from starter.cli.journal import decision_table, no_decisions


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
    """An empty decision log (a mistyped conversation id, an unknown rule) printed an empty
    twelve-column table whose headers, at 80 columns, read "conv ersa tion" (a new user's report)."""
    assert no_decisions("nope", None, None, None) == "no model calls in the decision log for conversation nope"
    assert no_decisions(None, "raj_sanchez_2970", "check-status", "2026-11-23") == (
        "no model calls in the decision log for that customer, rule check-status since 2026-11-23")
    # --since alone read "... decision log for since 2099-01-01" (a new user's report)
    assert no_decisions(None, None, None, "2099-01-01") == "no model calls in the decision log since 2099-01-01"
    assert no_decisions(None, None, None, None) == "no model calls in the decision log"
