"""The journal's records as the workflow shapes them (``workflows.conversation.journal.JournalLog``,
pure apart from its clock): call numbering per turn, the verdict vocabulary, later stages of
a shown write, transcript numbering (also resumed after continue-as-new), and the record
one ``record_turn`` call carries."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from tests.policy_fixtures import PENDING, authenticated
from workflows.domain import keys
from workflows.domain import transitions as tr
from workflows.domain.actions import make_tool_call
from workflows.domain.policy.approvals import Approval, ApprovalStatus
from workflows.domain.contracts import ModelRequest, Outcome
from workflows.domain.journal import ACCEPTED_VERDICTS, EntryKind, TurnRecord, Verdict, VerdictRecord
from workflows.conversation.journal import JournalLog, operation_turn
from workflows.domain.state import ConversationState, ConversationStatus, Phase, Role

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def shown_write(state: ConversationState):
    """A cancel of PENDING shown for confirmation at the state's current turn."""
    call = make_tool_call("cancel_pending_order", {"order_id": PENDING, "reason": "no longer needed"})
    return tr.await_confirmation(state, keys.operation_id(state.conversation_id, state.turn), call, "Cancel it")


def test_the_verdict_vocabulary_separates_accepted_from_refused():
    assert {v.value for v in Verdict} == {"read_ran", "replied", "shown", "confirmed", "executed", "declined",
                                          "transferred", "ended", "rejected", "malformed", "superseded", "cancelled"}
    assert {v for v in Verdict if not v.accepted} == {Verdict.REJECTED, Verdict.MALFORMED, Verdict.SUPERSEDED}
    assert all(v.accepted for v in ACCEPTED_VERDICTS)


def test_a_turn_numbers_its_calls_and_entries_and_makes_one_record():
    state, clock = authenticated(), Clock()
    log = JournalLog(state, clock)
    log.user_message(state.turn, "hello", "msg-1")
    assert (log.next_call(), log.next_call()) == (1, 2)
    log.call_verdict(Verdict.REJECTED, "check-status", "not delivered")
    log.said("Which order?")
    record = log.take(state)
    assert record.conversation_id == "policy-test" and record.customer_id == state.customer.user_id
    assert (record.turn, record.model_calls) == (state.turn, 2)
    [v] = record.verdicts
    assert (v.turn, v.call_seq, v.verdict, v.rule, v.reason, v.outcome) == (state.turn, 2, Verdict.REJECTED,
                                                                          "check-status", "not delivered", None)
    assert [(e.turn, e.seq, e.role, e.kind, e.message_id, e.text) for e in record.transcript] == [
        (state.turn, 0, Role.USER, EntryKind.MESSAGE, "msg-1", "hello"),
        (state.turn, 1, Role.ASSISTANT, EntryKind.REPLY, None, "Which order?")]
    assert record.transcript[0].at < record.transcript[1].at
    assert log.take(state) is None  # sent once: nothing left


def test_a_notice_after_the_turn_continues_its_numbering_and_completes_no_turn():
    state = authenticated()
    log = JournalLog(state, Clock())
    log.user_message(state.turn, "yes", "msg-2")
    log.said("Waiting for a supervisor.")
    log.take(state)
    log.said("A supervisor approved your request.", EntryKind.NOTICE)
    record = log.take(state)
    assert (record.turn, record.model_calls) == (None, 0)
    assert [(e.turn, e.seq, e.kind) for e in record.transcript] == [(state.turn, 2, EntryKind.NOTICE)]


def test_a_new_run_resumes_the_turns_numbering_from_the_state():
    state = authenticated()
    tr.add_turn(state, Role.ASSISTANT, "Hello!")  # the turn's reply, before continue-as-new
    log = JournalLog(state, Clock())  # the next run: no memory
    log.said("A supervisor rejected it.", EntryKind.NOTICE)
    [entry] = log.take(state).transcript
    assert (entry.turn, entry.seq) == (state.turn, 2)  # after the message (0) and the reply (1)


def test_later_stages_of_a_shown_write_name_its_turn_not_its_call():
    state, clock = authenticated(), Clock()
    pending = shown_write(state)
    proposed = state.turn
    tr.receive_user_message(state, "yes")
    log = JournalLog(state, clock)
    state.subscribe(log.record)
    approval = Approval.model_construct(approval_id="a1", operation_id=pending.operation_id,
                                        status=ApprovalStatus.PENDING)
    tr.await_approval(state, tr.take_pending(state), approval)
    [v] = log.take(state).verdicts
    assert (v.turn, v.call_seq, v.verdict) == (proposed, None, Verdict.CONFIRMED) and state.turn == proposed + 1


@pytest.mark.parametrize("ok, escalated, expected", [
    (True, False, (Verdict.EXECUTED, None, "applied")),
    (False, False, (Verdict.EXECUTED, "tool-error", "refused")),
    (None, True, (Verdict.EXECUTED, "tool-error", "unknown")),
    (None, False, (Verdict.CANCELLED, "conversation-cancelled", None)),
])
def test_a_confirmed_writes_verdict_follows_what_the_state_recorded(ok, escalated, expected):
    state = authenticated()
    pending = shown_write(state)
    log = JournalLog(state, Clock())
    state.subscribe(log.record)
    if ok is not None:
        tr.apply_write_result(state, pending.call, pending.operation_id, "key", "{}" if ok else "Error: no", ok)
    if escalated:
        tr.escalate(state, pending, "could not be shown to have completed")
    if ok is None and not escalated:
        tr.write_not_started(state, pending)
    [v] = log.take(state).verdicts
    assert (v.verdict, v.rule, v.outcome) == expected and v.call_seq is None


def test_a_cancel_settles_the_shown_write_and_the_writes_awaiting_approval():
    state = authenticated()
    shown = shown_write(state)
    waiting = shown.model_copy(update={"operation_id": keys.operation_id(state.conversation_id, 1),
                                       "proposed_turn": 1})
    state.awaiting_approval.append(waiting)
    log = JournalLog(state, Clock())
    state.subscribe(log.record)
    tr.close(state, ConversationStatus.CANCELLED, "the user cancelled")
    verdicts = log.take(state).verdicts
    assert [(v.turn, v.verdict, v.rule) for v in verdicts] == [(shown.proposed_turn, Verdict.CANCELLED,
                                                                "conversation-cancelled"),
                                                               (1, Verdict.CANCELLED, "conversation-cancelled")]


def test_approvals_withdrawn_by_a_close_are_settled_once():
    state = authenticated()
    approval = Approval.model_construct(approval_id="a1", operation_id=keys.operation_id("policy-test", 3),
                                        status=ApprovalStatus.WITHDRAWN, note="transferred to a human agent")
    state.approvals.append(approval)
    state.status, state.phase = ConversationStatus.TRANSFERRED, Phase.CLOSED
    log = JournalLog(state, Clock())
    [v] = log.take(state).verdicts
    assert (v.turn, v.call_seq, v.verdict, v.reason) == (3, None, Verdict.CANCELLED, "transferred to a human agent")
    assert log.take(state) is None  # not told twice


def test_operation_turn_inverts_the_operation_id():
    assert operation_turn(keys.operation_id("conv.t9.x", 12)) == 12
    with pytest.raises(ValueError):
        operation_turn("no-turn-here")


def test_long_reasons_are_cut_and_bad_numbers_refused():
    log = JournalLog(authenticated(), Clock())
    log.next_call()
    log.call_verdict(Verdict.REJECTED, "tool-error", "x" * 5000)
    assert len(log.take(authenticated()).verdicts[0].reason) == 2000
    with pytest.raises(ValidationError):
        VerdictRecord(turn=-1, verdict=Verdict.REPLIED, at=T0)
    with pytest.raises(ValidationError):
        VerdictRecord(turn=1, call_seq=0, verdict=Verdict.REPLIED, at=T0)
    with pytest.raises(ValidationError):
        VerdictRecord(turn=1, verdict="approved-by-magic", at=T0)
    with pytest.raises(ValidationError):
        TurnRecord(conversation_id="c", model_calls=-1)


def test_model_requests_carry_the_view_and_old_ones_still_decode():
    view = {"conversation_id": "c", "turn": 2}
    req = ModelRequest(conversation_id="c", turn=2, call_seq=3, prompt_version="v", view=view)
    assert ModelRequest.model_validate_json(req.model_dump_json()) == req
    old = ModelRequest.model_validate({"conversation_id": "c", "snapshot": {"system": "s", "content": "x"}})
    assert (old.turn, old.call_seq, old.view) == (0, 0, None)
    with pytest.raises(ValidationError):
        ModelRequest(conversation_id="c")


def test_outcome_values_are_the_tool_outcomes():
    state = authenticated()
    log = JournalLog(state, Clock())
    log.next_call()
    log.call_verdict(Verdict.READ_RAN, outcome=Outcome.REFUSED)
    assert log.take(state).verdicts[0].outcome == "refused"


def test_a_reply_written_by_its_model_call_is_not_sent_again_unless_the_turn_differs():
    state, clock = authenticated(), Clock()
    log = JournalLog(state, clock)
    log.user_message(state.turn, "hello", "msg-1")
    call_seq = log.next_call()
    so_far = log.so_far(state)
    written = so_far.with_reply(call_seq, "Hi there", T0)
    assert [(v.call_seq, v.verdict) for v in written.verdicts] == [(1, Verdict.REPLIED)]
    assert [(e.seq, e.kind, e.text) for e in written.transcript] == [(0, EntryKind.MESSAGE, "hello"),
                                                                      (1, EntryKind.REPLY, "Hi there")]
    log.model_wrote(so_far, "Hi there")
    log.call_verdict(Verdict.REPLIED)
    log.said("Hi there")
    assert log.take(state) is None  # the model call wrote exactly this (times aside)
    # the workflow said something else (e.g. the reply was superseded): its own record goes out
    log.user_message(state.turn + 1, "and?", "msg-2")
    log.next_call()
    log.model_wrote(log.so_far(state), "Sure")
    log.call_verdict(Verdict.SUPERSEDED, "superseded", "newer message")
    log.said("Sure")
    record = log.take(state)
    assert record is not None and [v.verdict for v in record.verdicts] == [Verdict.SUPERSEDED]
    assert not record.same_rows(written) and written.same_rows(written.model_copy(update={"transcript": [
        e.model_copy(update={"at": T0 + timedelta(days=1)}) for e in written.transcript]}))


def test_a_turns_events_become_its_rows_as_they_happen():
    """The transitions record what happened; ``JournalLog.record`` turns each event into the
    rows the turn's hand-written calls made: numbered calls, their verdicts, the transcript."""
    state, clock = authenticated(), Clock()
    log = JournalLog(state, clock)
    state.subscribe(log.record)
    tr.receive_user_message(state, f"cancel {PENDING}", "msg-7")
    tr.ask_model(state)
    tr.reject_proposal(state, "check-status", "read the order first", {"kind": "tool_call"})
    tr.ask_model(state)
    read = make_tool_call("get_order_details", {"order_id": PENDING})
    tr.read_failed(state, read, "the order system could not be reached")
    tr.ask_model(state)
    assert log.for_model(state)[0] == 3
    shown = shown_write(state)
    tr.say(state, "Shall I cancel it?", EntryKind.REPLY)
    record = log.take(state)
    assert (record.turn, record.model_calls) == (state.turn, 3)
    assert [(v.call_seq, v.verdict, v.rule, v.outcome) for v in record.verdicts] == [
        (1, Verdict.REJECTED, "check-status", None), (2, Verdict.READ_RAN, "tool-error", "unknown"),
        (3, Verdict.SHOWN, None, None)]
    assert [(e.seq, e.role, e.kind, e.message_id) for e in record.transcript] == [
        (0, Role.USER, EntryKind.MESSAGE, "msg-7"), (1, Role.ASSISTANT, EntryKind.REPLY, None)]
    tr.receive_user_message(state, "no", "msg-8")
    tr.decline(state, tr.take_pending(state), "user-declined", "the user declined", quote_detail=True)
    [v] = log.take(state).verdicts
    assert (v.turn, v.call_seq, v.verdict, v.reason) == (shown.proposed_turn, None, Verdict.DECLINED,
                                                        "the user declined")
    assert state.steps[-1].error == "the user declined: Cancel it"  # the state quotes the detail


def test_events_without_a_listener_go_nowhere():
    state = authenticated()
    tr.receive_user_message(state, "hello")
    tr.ask_model(state)
    assert "listeners" not in state.model_dump_json() and state.model_dump()["turn"] == 2
