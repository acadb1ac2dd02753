"""Pure parts of the chaos suite (``bench/chaos/user.py``, ``bench/chaos/faults.py``).

Regression: in the first 200-task run a conversation whose workflow task kept timing out on
the overloaded machine answered after 22 minutes; the front end had stopped resending its
message after 900 s, so the task was counted lost although nothing was. A message is now
resent with the same id for as long as its task may run.
"""

from __future__ import annotations

import threading
from collections import Counter

from bench.chaos.run import parser
from bench.chaos.faults import ChaosBoard, _conversation
from bench.chaos.user import FrontEnd, p95, reason_group
from starter.client.conversations import ConversationError
from systems.service_kit.faults import Fault


class _Flaky:
    """A client whose ``send_message`` says ``outcome_unknown`` ``failures`` times, then answers."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.ids: list[str] = []

    async def send_message(self, conversation_id: str, text: str, message_id: str) -> str:
        self.ids.append(message_id)
        if len(self.ids) <= self.failures:
            raise ConversationError("unknown", "outcome_unknown", message_id=message_id)
        return f"reply to {text}"


async def test_front_end_resends_with_the_same_message_id_until_answered(monkeypatch):
    async def instant(_seconds: float) -> None:
        return None

    monkeypatch.setattr("bench.chaos.user.asyncio.sleep", instant)
    client = _Flaky(failures=4)
    front = FrontEnd(client, patience_seconds=60)  # type: ignore[arg-type]
    assert await front.send_message("c1", "yes") == "reply to yes"
    assert len(client.ids) == 5 and len(set(client.ids)) == 1
    assert front.retries == 4 and len(front.message_seconds) == 1


async def test_front_end_does_not_resend_a_refusal():
    class Refusing:
        async def send_message(self, *args):
            raise ConversationError("finished", "finished")

    front = FrontEnd(Refusing())  # type: ignore[arg-type]
    try:
        await front.send_message("c1", "yes")
    except ConversationError as err:
        assert err.kind == "finished"
    else:
        raise AssertionError("a refusal must reach the runner")
    assert front.retries == 0


def test_messages_are_resent_as_long_as_the_task_may_run_by_default():
    args = parser().parse_args(["--tasks", "t.json", "--n", "1", "--task-timeout", "1234"])
    assert args.patience is None and args.task_timeout == 1234  # run() uses the task timeout


def test_any_five_faults_cover_every_kind():
    counts: Counter = Counter()
    board = ChaosBoard(1.0, seed=3, counts=counts, lock=threading.Lock())
    kinds = [board.take("/operations", None, None)[0] for _ in range(10)]
    assert set(kinds[:5]) == set(Fault) == set(kinds[5:])
    assert counts == Counter({f.value: 2 for f in Fault})
    assert ChaosBoard(0.0, 1, Counter(), threading.Lock()).take("/x", None, None) == (None, None)


def test_header_fault_still_wins_and_is_counted():
    counts: Counter = Counter()
    board = ChaosBoard(0.0, seed=1, counts=counts, lock=threading.Lock())
    assert board.take("/tickets", "slow_lock", "2") == (Fault.SLOW_LOCK, 2.0)
    assert counts == Counter({"slow_lock": 1})


def test_effect_keys_name_their_conversation():
    assert _conversation("pay:cancel_pending_order:#W1:tb-x-3.t4") == "tb-x-3"
    assert _conversation("pay:modify_pending_order_payment:#W1:tb-x-12.t10") == "tb-x-12"


def test_reasons_group_without_ids_and_p95_is_nearest_rank():
    assert reason_group("cancel of #W123 for sara_doe_4321 failed") == reason_group("cancel of #W9 for li_wu_1234 failed")
    assert p95([]) == 0.0
    assert p95([float(i) for i in range(1, 101)]) == 95.0
    assert p95([3.0]) == 3.0
