"""``statekeeper replay-check`` as printed: a run without writes, emails or tickets (an
unknown id, a conversation that only read) says there were none, not an empty eight-column
table squeezed into 80 columns ("workflo / w", "evidenc / e") before its verdict. A run with
effects gets the table, keys and reasons whole."""

from __future__ import annotations

from starter.cli import app as cli
from starter.ops.replay_check import EffectReport, ReplayReport
from starter.cli.replay import _print


def _printed(report: ReplayReport, capsys, monkeypatch) -> str:
    monkeypatch.setattr(cli.console, "width", 80)
    _print(report)
    return capsys.readouterr().out


def test_no_effects_is_one_line_not_an_empty_table(capsys, monkeypatch):
    report = ReplayReport(conversation_id="nope", workflow_id="support-nope",
                          reasons=["no conversation has this id (a refund's id is not a conversation's)"])
    out = _printed(report, capsys, monkeypatch)
    assert "effects invoked (writes, emails, tickets): none" in out
    assert "┏" not in out and "Effects invoked (history)" not in out
    assert "verdict: refuse" in out and "no conversation has this id" in out


def test_effects_are_a_table(capsys, monkeypatch):
    key = "cancel_pending_order:#W4566809:chat-1.t2"
    effect = EffectReport(workflow_id="refund-main-W4566809-chat-1.t2", event_id=16, activity="run_write_tool",
                          system="retail", key=key, ended="completed", status="deduplicated", reason="keyed")
    out = _printed(ReplayReport(conversation_id="chat-1", workflow_id="support-chat-1", effects=[effect],
                                verdict="resume"), capsys, monkeypatch)
    assert "Effects invoked (history) and what the systems hold" in out and "none" not in out
    assert "verdict: resume" in out
