"""The model activity records each call in the decision log itself: one ``model_calls`` row
per (conversation, turn, call_seq) with the view, prompt version, model, proposal, stop
reason and token usage; a retried attempt overwrites it; a malformed or failed call is
recorded without a proposal; a journal that fails never fails the call. Real SQLite
journal, the offline model through the SDK (in-process transport)."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.store.journal import JournalStore
from activities.llm.model_activity import ModelActivities, offline_client
from systems.model.server import BrainFault, StoppedEarly
from tests.journal_fixtures import sqlite_url
from tests.model_requests import MODEL, email_state, request
from workflows.domain.contracts import ModelRequest
from workflows.domain.prompt import PROMPT_VERSION, state_view
from workflows.domain.state import Customer

REPLY = {"kind": "reply", "text": "Hello!"}


def view_request(call_seq: int = 1, customer: bool = True, **update) -> ModelRequest:
    state = email_state()
    if customer:
        state.customer = Customer(user_id="ab_1", authenticated_via="email", authenticated_turn=1,
                                  email="a.b@example.com")
    fields = {"conversation_id": state.conversation_id, "turn": state.turn, "call_seq": call_seq,
              "prompt_version": PROMPT_VERSION, "view": state_view(state), **update}
    return ModelRequest(**fields)


@pytest.fixture
def journal(tmp_path):
    store = JournalStore(sqlite_url(tmp_path))
    yield store
    store.close()


def activities(journal, brain) -> ModelActivities:
    return ModelActivities(offline_client(10.0, brain=brain), model=MODEL, max_tokens=512, journal=journal)


async def test_a_call_writes_its_row(journal):
    seen = []
    req = view_request()
    model = activities(journal, lambda v, p: seen.append(v) or REPLY)
    result = await ActivityEnvironment().run(model.propose_action, req)
    assert seen == [req.view]  # the model got the view, rendered by the activity
    [row] = journal.decisions()
    assert (row.conversation_id, row.turn, row.call_seq, row.customer_id) == ("conv-1", 1, 1, "ab_1")
    assert (row.prompt_version, row.model, row.stop_reason) == (PROMPT_VERSION, MODEL, "tool_use")
    assert row.view == req.view and row.proposal == REPLY
    assert (row.input_tokens, row.output_tokens) == (result.input_tokens, result.output_tokens) and row.input_tokens
    # the first call writes the shared prefix to the stand-in's prompt cache, a second one reads it
    assert row.cache_creation_input_tokens == result.cache_creation_input_tokens > 0
    second = await ActivityEnvironment().run(model.propose_action, req.model_copy(update={"call_seq": 2}))
    assert second.cache_read_input_tokens > 0
    assert journal.decisions()[1].cache_read_input_tokens == second.cache_read_input_tokens
    assert row.verdict is None  # the workflow's verdict comes with its turn record


async def test_a_malformed_attempt_is_recorded_and_its_retry_overwrites_it(journal):
    answers = [StoppedEarly("refusal", REPLY), REPLY]
    acts = activities(journal, lambda v, p: answers.pop(0))
    with pytest.raises(ApplicationError) as info:
        await acts.propose_action(view_request())
    assert info.value.type == "MalformedModelOutput"
    [row] = journal.decisions()
    assert row.proposal is None and row.stop_reason == "refusal" and row.model == MODEL
    await acts.propose_action(view_request())  # Temporal's retry: same conversation, turn and call_seq
    [row] = journal.decisions()
    assert row.proposal == REPLY and row.stop_reason == "tool_use"


async def test_a_failed_call_is_recorded_without_a_response(journal):
    def down(view, plan):
        raise BrainFault(529, "overloaded_error", "Overloaded")
    with pytest.raises(ApplicationError) as info:
        await activities(journal, down).propose_action(view_request(call_seq=2))
    assert info.value.type == "ModelUnavailable"
    [row] = journal.decisions()
    assert (row.call_seq, row.proposal, row.stop_reason, row.input_tokens) == (2, None, None, 0)


async def test_a_journal_failure_never_fails_the_model_call(journal, caplog):
    journal.engine.dispose()
    journal.record_model_call = _raise  # the journal's database is gone
    with caplog.at_level(logging.WARNING, logger="statekeeper.model"):
        result = await activities(journal, lambda v, p: REPLY).propose_action(view_request())
    assert result.action.kind == "reply"
    [message] = [r.getMessage() for r in caplog.records if r.name == "statekeeper.model"]
    assert "not recorded" in message and "OperationalError" in message
    assert "a.b@example.com" not in message and "Hello" not in message  # ids only, no personal data


def _raise(record, turn=None):
    import sqlalchemy.exc
    raise sqlalchemy.exc.OperationalError("INSERT ... a.b@example.com", {}, Exception("down"))


async def test_a_v010_snapshot_request_still_runs_and_is_not_recorded(journal):
    legacy = request()  # what v0.1.0 workflows sent: a rendered snapshot, no view, no call_seq
    assert legacy.view is None and legacy.call_seq == 0
    result = await activities(journal, lambda v, p: REPLY).propose_action(legacy)
    assert result.action.kind == "reply" and journal.decisions() == []


async def test_an_unknown_prompt_version_is_rejected_without_a_model_call(journal):
    calls = []
    with pytest.raises(ApplicationError) as info:
        await activities(journal, lambda v, p: calls.append(v) or REPLY).propose_action(
            view_request(prompt_version="1999-01-01"))
    assert info.value.type == "ModelRequestRejected" and info.value.non_retryable
    assert calls == [] and journal.decisions() == []


def test_a_request_needs_a_view_or_a_snapshot():
    with pytest.raises(ValueError):
        ModelRequest(conversation_id="c")
    decoded = ModelRequest.model_validate({"conversation_id": "c", "snapshot": {"system": "s", "content": "x"}})
    assert decoded.turn == 0 and decoded.view is None  # a v0.1.0 payload decodes


def turn_journal(request: ModelRequest) -> ModelRequest:
    """``request`` carrying its turn's journal record so far (the user's message)."""
    from workflows.domain.journal import EntryKind, Role, TranscriptRecord, TurnRecord

    said = TranscriptRecord(turn=request.turn, seq=0, role=Role.USER, kind=EntryKind.MESSAGE, text="hi",
                            at=datetime(2026, 11, 1, tzinfo=timezone.utc))
    record = TurnRecord(conversation_id=request.conversation_id, turn=request.turn, transcript=[said])
    return request.model_copy(update={"journal": record})


def journaling(journal, brain) -> ModelActivities:
    """The worker's wiring: one journal gets the call rows and the turn records."""
    model = activities(journal, brain)
    model.turn_records = journal
    return model


async def test_a_reply_writes_its_call_and_its_turn_together(journal):
    result = await journaling(journal, lambda v, p: REPLY).propose_action(turn_journal(view_request()))
    assert result.journaled
    assert [(r.call_seq, r.verdict) for r in journal.decisions()] == [(1, "replied")]
    assert [(e.role, e.text) for e in journal.transcript("conv-1")] == [("user", "hi"), ("assistant", "Hello!")]


async def test_when_the_turn_part_fails_the_call_row_is_written_alone_and_the_workflow_writes_the_turn(journal):
    def refused(conn, record):
        import sqlalchemy.exc
        raise sqlalchemy.exc.OperationalError("INSERT ... a.b@example.com", {}, Exception("down"))
    journal._record_turn = refused
    result = await journaling(journal, lambda v, p: REPLY).propose_action(turn_journal(view_request()))
    assert result.action.kind == "reply" and not result.journaled  # the workflow's own record_turn follows
    [row] = journal.decisions()
    assert (row.call_seq, row.proposal, row.verdict) == (1, REPLY, None)
    assert journal.transcript("conv-1") == []


async def test_a_tool_call_proposal_writes_no_turn_record(journal):
    call = {"kind": "tool_call", "tool": {"name": "get_order_details", "arguments": {"order_id": "#W0000001"}}}
    result = await journaling(journal, lambda v, p: call).propose_action(turn_journal(view_request()))
    assert not result.journaled and journal.transcript("conv-1") == []
    assert [r.proposal["kind"] for r in journal.decisions()] == ["tool_call"]
