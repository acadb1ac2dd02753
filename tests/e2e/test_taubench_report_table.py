"""The τ-bench runner's report tables print what the report holds: a policy refusal is
``tool: [rule] reason``, and rich took ``[modify-payment]`` for markup and dropped it
("modify_pending_order_payment:  gift card ... not enough ..."), so the table hid which
clause refused the action (seen running ``statekeeper taubench`` on the training tasks)."""

from __future__ import annotations

from starter.cli import app as cli
from settings import Settings

REFUSAL = ("modify_pending_order_payment: [modify-payment] gift card gift_card_8893815 has 18.00, "
           "not enough to cover the order total of 97.35")


def _report(passed: bool) -> dict:
    task = {"task_index": 24, "passed": passed, "hash_match": passed, "outputs_match": passed,
            "reason": "" if passed else "unmatched: [modify-payment] refused", "policy_refusals": [REFUSAL]}
    return {"tasks": [task], "summary": {"total": 1, "passed": int(passed), "hash_match": int(passed), "writes": 1,
                                         "duplicate_writes": 0, "approvals_granted": 0, "seconds": 1.0}}


def test_the_refusal_table_keeps_the_rule_id(capsys, monkeypatch):
    monkeypatch.setattr(cli.console, "width", 400)
    cli._print_report(_report(True), Settings(), started_server=False)
    assert REFUSAL in capsys.readouterr().out


def test_the_failed_table_keeps_the_reason_as_written(capsys, monkeypatch):
    monkeypatch.setattr(cli.console, "width", 400)
    cli._print_report(_report(False), Settings(), started_server=False)
    assert "unmatched: [modify-payment] refused" in capsys.readouterr().out
