"""What ``statekeeper approvals`` prints for the pending approvals (``approval_table``), read at an
80-column terminal: one small table an approval, one row a field, each counted ("1 of 2"): the
approval id whole (what a decision names), the process, the write and its order, the amount, the
detail the user confirmed with its brackets as they are (rich would read "[color white, ...]" as
markup and drop it), the reason and the times; nothing is cut to "…" and no line is wider than
the terminal. An approval whose process could not be read says so."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

from rich.console import Console

from starter.cli.app import UNREADABLE, approval_table
from starter.client.approvals import ApprovalItem, ApprovalOperation

REFUND_ID = "refund-main-W2809253-exchange-request-2024-06-01-a1"
APPROVAL_ID = f"{REFUND_ID}~0123456789ab"
DETAIL = ("Exchange in order #W2809253: Gaming Mouse 8214883393 (150.58) -> 2880340443 [color white, sensor type "
          "optical] (137.22). Price difference to be refunded: 13.36 via gift card (balance 36.00).")


def _shown(table, width: int = 80) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(table)
    return console.export_text()


def _joined(text: str) -> str:
    """The table's text with its borders and line breaks removed: a folded cell reads whole again."""
    cells = [part.strip() for line in text.splitlines() for part in line.replace("│", "┃").split("┃")]
    return "".join(cells)


def _items() -> list[ApprovalItem]:
    requested = datetime(2026, 12, 6, 4, 30, 5, tzinfo=timezone.utc)
    return [
        ApprovalItem(approval_id=APPROVAL_ID, process="refund", process_id=REFUND_ID,
                     operation=ApprovalOperation(tool="exchange_delivered_order_items", order_id="#W2809253",
                                                 detail=DETAIL, amount=Decimal("13.36")),
                     reason="13.36 is above the approval threshold of 10.00.", requested_at=requested,
                     expires_at=datetime(2026, 12, 7, 4, 30, 5, tzinfo=timezone.utc)),
        ApprovalItem(approval_id="support-desk-43~abcdefabcdef", process="conversation", process_id="desk-43"),
    ]


def test_each_pending_approval_is_a_row_with_its_id_whole_and_its_detail_as_confirmed():
    text = _shown(approval_table(_items()))
    assert "Approval 1 of 2 awaiting a decision" in text and "Approval 2 of 2 awaiting a decision" in text
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    joined = _joined(text)
    for value in (APPROVAL_ID, f"refund {REFUND_ID}", "exchange_delivered_order_items on order #W2809253", "13.36",
                  DETAIL.replace(" ", ""), "13.36isabovetheapprovalthresholdof10.00.", "2026-12-0604:30:05",
                  "2026-12-0704:30:05"):
        assert value.replace(" ", "") in joined.replace(" ", ""), value
    # the id a decision names is on one line when the terminal is wide enough for it
    assert APPROVAL_ID in _shown(approval_table(_items()), width=200)


def test_an_approval_whose_process_could_not_be_read_says_so():
    joined = _joined(_shown(approval_table(_items()), width=200)).replace(" ", "")
    assert "conversationdesk-43" in joined and UNREADABLE.replace(" ", "") in joined
