"""How ``replay-check`` classifies each effect from what the systems hold (``starter.ops.replay_check``):
the dispatch log is real (SQLite); the retail ledger and the services' lookups are stand-ins
answering as the real adapters do (a result, nothing, or an error when they cannot be asked).
The history side is covered on a real server in tests/workflows/test_replay_decision.py."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from activities.reconcile import DispatchLog
from starter.ops.replay_check import Systems, classify
from starter.ops.replay_history import Invoked, RunHistory
from systems.retail.engine import make_engine
from workflows.domain.actions import make_tool_call
from workflows.domain.contracts import EmailRequest, WriteToolRequest

KEY = "cancel_pending_order:#W1:c-1.t2"
PAY = f"pay:{KEY}"
EMAIL_KEY = f"email:{KEY}"


class Ledger:
    """The retail ledger by key: ``ok`` True/False recorded, None not recorded; its side
    channels hold ``outbox`` (rows with ``message_key``)."""

    def __init__(self, ok, outbox=()):
        self.ok, self.outbox = ok, list(outbox)

    def outbox_messages(self, store):
        return self.outbox

    def recorded(self, store, tool, arguments, key):
        return None if self.ok is None else SimpleNamespace(ok=self.ok)


class Service:
    """A payments/email/ticketing lookup: ``answer``, or raises when it cannot be asked."""

    def __init__(self, answer=None, down: bool = False):
        self.answer, self.down = answer, down

    def _reply(self):
        if self.down:
            raise ConnectionError("service gone")
        return self.answer

    def find(self, key):
        return self._reply()

    def sent(self, reference):
        return self._reply()


def _write(ended: str = "completed", failure_type=None) -> Invoked:
    call = make_tool_call("cancel_pending_order", {"order_id": "#W1", "reason": "no longer needed"})
    return Invoked(workflow_id="support-c-1", event_id=7, activity="run_write_tool", ended=ended,
                   failure_type=failure_type, request=WriteToolRequest(store="main", call=call, idempotency_key=KEY))


def _email(ended: str = "completed") -> Invoked:
    return Invoked(workflow_id="refund-x", event_id=9, activity="send_customer_email", ended=ended,
                   request=EmailRequest(store="main", message_key=EMAIL_KEY, to_email="a@b.c", subject="s", body="b"))


@pytest.fixture
def log(tmp_path: Path) -> DispatchLog:
    return DispatchLog(make_engine(f"sqlite:///{tmp_path / 'dispatch.sqlite'}"))


def _one(invoked: Invoked, systems: Systems, worker_services=None):
    [effect], _ = classify([RunHistory(workflow_id="support-c-1", invoked=[invoked], services=worker_services)],
                           systems)
    return effect


def test_money_dispatched_without_a_result_while_payments_cannot_be_asked_is_unknown(log):
    log.mark(PAY, "payments", "dispatched")
    effect = _one(_write("failed", "Timeout"), Systems(backend=Ledger(True), log=log, payments=Service(down=True)))
    assert effect.status == "unknown"
    assert effect.reason == (f"payments: {PAY} dispatched without a recorded result, and the payments service "
                             "cannot be asked (a connection failed)")
    assert effect.evidence[0] == "retail ledger: recorded applied"


def test_money_found_by_its_key_or_never_dispatched_is_deduplicated(log):
    found = _one(_write(), Systems(backend=Ledger(True), log=log, payments=Service({"movements": 1})))
    assert found.status == "deduplicated" and f"payments {PAY}: found (keys honoured)" in found.evidence
    # payments down, but nothing was dispatched under the key: the service honours it on a re-run
    quiet = _one(_write("in_flight"), Systems(backend=Ledger(None), log=log, payments=Service(down=True)))
    assert quiet.status == "deduplicated" and "retail ledger: not recorded" in quiet.evidence


def test_a_completed_write_the_ledger_does_not_hold_is_unproven(log):
    effect = _one(_write(), Systems(backend=Ledger(None), log=log))
    assert effect.status == "unproven" and "holds nothing under its key" in effect.reason


def test_an_outcome_unknown_failure_stays_unknown_even_when_the_ledger_holds_nothing(log):
    effect = _one(_write("failed", "OutcomeUnknown"), Systems(backend=Ledger(None), log=log))
    assert effect.status == "unknown" and "OutcomeUnknown" in effect.reason


def test_emails_are_judged_by_reference_in_a_system_without_keys(log):
    services = lambda answer, down=False: Systems(backend=Ledger(None), log=log, outbox=Service(answer, down))  # noqa: E731
    assert _one(_email(), services([{"id": 1}])).status == "deduplicated"
    lost = _one(_email(), services([]))
    assert lost.status == "unproven" and lost.reason == "no keys, and no reference match for a send that completed"
    assert _one(_email("timed_out"), services([])).status == "deduplicated"  # not sent: a re-run asks first
    # still in flight (a terminated run's attempt is not stopped): it may land until its deadline
    flying = _one(_email("in_flight"), services([]))
    assert flying.status == "unproven" and "still in flight" in flying.reason
    assert _one(_email("timed_out"), services(None, down=True)).status == "unproven"
    log.mark(f"email:{EMAIL_KEY}", "email", "dispatched")
    assert _one(_email("timed_out"), services(None, down=True)).status == "unknown"


def test_without_the_email_service_the_retail_outbox_is_evidence_only_for_a_worker_that_used_it(log):
    """The command has no email URL: a worker that sent through the email service (its
    identity says so) leaves nothing in the retail outbox, which proves nothing then."""
    sent = Systems(backend=Ledger(None, outbox=[{"message_key": EMAIL_KEY}]), log=log)
    assert _one(_email(), sent, worker_services="---0123456789ab").status == "deduplicated"
    through_service = _one(_email("in_flight"), sent, worker_services="pet0123456789ab")
    assert through_service.status == "unproven" and "STATEKEEPER_EMAIL_URL is not set" in through_service.reason
    empty = Systems(backend=Ledger(None), log=log)
    lost = _one(_email(), empty)  # an older worker that did not say: a completed send the outbox lacks
    assert lost.status == "unproven" and "retail outbox hold nothing under its key" in lost.reason
    assert _one(_email("in_flight"), empty, worker_services="---0123456789ab").status == "deduplicated"  # keyed


def test_reads_and_model_calls_are_counted_as_harmless():
    run = RunHistory(workflow_id="support-c-1", local_activities=3,
                     invoked=[Invoked("support-c-1", 5, "propose_action"), Invoked("support-c-1", 6, "propose_action"),
                              Invoked("support-c-1", 8, "find_recorded_write")])
    effects, harmless = classify([run], Systems(backend=Ledger(None)))
    assert effects == [] and harmless == {"propose_action": 2, "find_recorded_write": 1,
                                          "local activities (reads, journal)": 3}
