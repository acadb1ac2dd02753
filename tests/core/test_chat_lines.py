"""What `statekeeper chat` shows of a reply: its text as it is. Rich read bracketed text as
markup, so an exchange's confirmation lost the new variant's options ("-> 2880340443 [color
white, ...] (137.22)" showed as "-> 2880340443  (137.22)") and a refusal quoting "[rule]" lost
the rule (a new user's report)."""

from __future__ import annotations

from rich.console import Console

from starter.cli.support import agent_line


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
