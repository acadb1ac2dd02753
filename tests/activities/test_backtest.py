"""The backtest engine on constructed decision-log rows, through the model activity's own SDK
path to the offline stand-in (in process, and over real HTTP), with a real journal on SQLite."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

import pytest
import sqlalchemy as sa

from activities.store.journal import DecisionRow, JournalStore, ModelCallRecord
from activities.llm.model_activity import build_client, offline_client
from settings import Settings
from starter.ops.backtest import BacktestError, backtest, load_decisions, model_client, propose
from starter.ops.backtest_diff import ACCEPTED, MALFORMED, Difference
from systems.model.plans import PlanBook
from systems.model.server import BrainFault, offline_brain, start_in_thread
from tests.core.test_offline_model import (
    CARD,
    DELIVERED,
    PENDING,
    RAJ,
    call,
    chat,
    customer,
    data,
    fact,
    order_fact,
)
from workflows.domain.journal import TurnRecord, Verdict, VerdictRecord
from workflows.domain.prompt import PROMPT_VERSION, state_view

NO_RETURNS = f"{PROMPT_VERSION}-no-returns"
T0 = datetime(2026, 11, 23, 9, 0, tzinfo=timezone.utc)
ITEMS = [i["item_id"] for i in data()["orders"][DELIVERED]["items"]]
RETURN = call("return_delivered_order_items", order_id=DELIVERED, item_ids=ITEMS, payment_method_id=CARD)
CANCEL = call("cancel_pending_order", order_id=PENDING, reason="no longer needed")


def view(text: str, order_id: str, cid: str) -> dict[str, Any]:
    state = chat(text, facts_=(fact("order_id", order_id),), customer=customer(RAJ),
                 orders={order_id: order_fact(order_id)})
    state.conversation_id = cid
    return json.loads(json.dumps(state_view(state)))


def row(cid: str, proposal: Optional[dict], verdict: Optional[str], v: dict, rule: Optional[str] = None,
        turn: int = 1, at: datetime = T0) -> DecisionRow:
    return DecisionRow(conversation_id=cid, turn=turn, call_seq=1, prompt_version=PROMPT_VERSION, model="recorded-model",
                       view=v, proposal=proposal, verdict=verdict, rule=rule, recorded_at=at)


def constructed_rows() -> list[DecisionRow]:
    """A return and a cancel the rules brain proposes and the workflow showed; a delivered
    order's cancel recorded as rejected (the current brain replies instead); a malformed call;
    a proposal superseded by a newer message (no policy verdict recorded)."""
    return [
        row("c-return", RETURN, Verdict.SHOWN.value, view(f"return everything in {DELIVERED}", DELIVERED, "c-return")),
        row("c-cancel", CANCEL, Verdict.EXECUTED.value, view(f"please cancel {PENDING}", PENDING, "c-cancel")),
        row("c-delivered", call("cancel_pending_order", order_id=DELIVERED, reason="no longer needed"),
            Verdict.REJECTED.value, view(f"cancel {DELIVERED}", DELIVERED, "c-delivered"), rule="cancel-pending-only"),
        row("c-malformed", None, Verdict.MALFORMED.value, view(f"please cancel {PENDING}", PENDING, "c-malformed"),
            rule="malformed-model-output"),
        row("c-superseded", CANCEL, Verdict.SUPERSEDED.value, view(f"please cancel {PENDING}", PENDING, "c-superseded"),
            rule="superseded-by-newer-message"),
    ]


async def run(rows, prompt: str, client=None):
    client = client or offline_client(10.0)
    try:
        return await backtest(rows, client, prompt=prompt, model="statekeeper-offline-stand-in", concurrency=2)
    finally:
        await client.close()


async def test_the_current_version_reproduces_what_was_recorded():
    report = await run(constructed_rows(), PROMPT_VERSION)
    results = {r.conversation_id: r.result for r in report.rows}
    assert results == {"c-return": Difference.SAME, "c-cancel": Difference.SAME,
                       "c-delivered": Difference.DIFFERENT_VERDICT,  # the current brain replies: accepted
                       "c-malformed": Difference.DIFFERENT_VERDICT,  # the current brain's proposal the policy accepts
                       "c-superseded": Difference.SAME}  # judged by the current policy: accepted, and equal
    assert (report.calls, report.same, report.different_proposal, report.different_verdict) == (5, 3, 0, 2)
    delivered = next(r for r in report.rows if r.conversation_id == "c-delivered")
    assert (delivered.recorded_verdict, delivered.new_verdict, delivered.new_proposal["kind"]) == \
        ("rejected:cancel-pending-only", ACCEPTED, "reply")
    malformed = next(r for r in report.rows if r.conversation_id == "c-malformed")
    assert malformed.recorded_verdict == MALFORMED and malformed.new_proposal == CANCEL
    assert next(r for r in report.rows if r.conversation_id == "c-superseded").recorded_verdict == ACCEPTED


async def test_withholding_the_return_tool_turns_the_return_into_a_transfer_and_nothing_else():
    report = await run(constructed_rows(), NO_RETURNS)
    differing = {r.conversation_id: r for r in report.rows if r.result is Difference.DIFFERENT_PROPOSAL}
    assert list(differing) == ["c-return"]
    changed = differing["c-return"]
    assert changed.recorded_proposal == RETURN and changed.new_proposal["kind"] == "transfer_to_human"
    assert changed.recorded_verdict == changed.new_verdict == ACCEPTED
    assert (report.calls, report.same, report.different_proposal, report.different_verdict) == (5, 2, 1, 2)
    out = report.as_json()
    assert set(out) == {"calls", "same", "different_proposal", "different_verdict", "rows"}
    assert out["rows"][0]["result"] == "different_proposal" and json.dumps(out)


async def test_over_real_http_the_stand_in_never_proposes_a_withheld_tool():
    running = start_in_thread()  # the default brain, reading the offered tools from the request JSON
    client = build_client("test-key", running.base_url, 10.0)
    try:
        v = view(f"return everything in {DELIVERED}", DELIVERED, "c-http")
        assert (await propose(client, v, "c-http", prompt=PROMPT_VERSION, model="m", max_tokens=1024))[0] == RETURN
        new, _ = await propose(client, v, "c-http", prompt=NO_RETURNS, model="m", max_tokens=1024)
        assert new["kind"] == "transfer_to_human" and "return delivered order items" in new["summary"]
    finally:
        await client.close()
        running.stop()


async def test_a_malformed_answer_is_a_malformed_verdict_not_a_failure():
    client = offline_client(10.0, brain=lambda v, plan: {"kind": "tool_call", "tool": {"name": "refund_everything"}})
    report = await run(constructed_rows()[:1], PROMPT_VERSION, client)
    only = report.rows[0]
    assert (only.new_proposal, only.new_verdict, only.result) == (None, MALFORMED, Difference.DIFFERENT_VERDICT)
    assert "not a valid ProposedAction" in only.new_reason


async def test_a_model_that_refuses_the_request_stops_the_backtest_with_its_reason():
    def refuse(v, plan):
        raise BrainFault(400, "invalid_request_error", "model: no such model")

    with pytest.raises(BacktestError, match="HTTP 400.*no such model"):
        await run(constructed_rows()[:1], PROMPT_VERSION, offline_client(10.0, brain=refuse))


async def test_a_transient_model_error_is_retried():
    attempts = []

    def flaky(v, plan):
        attempts.append(1)
        if len(attempts) == 1:
            raise BrainFault(529, "overloaded_error", "Overloaded")
        return offline_brain(v, plan)

    report = await run(constructed_rows()[:1], PROMPT_VERSION, offline_client(10.0, brain=flaky))
    assert len(attempts) == 2 and report.same == 1


async def test_an_unknown_prompt_version_runs_nothing():
    asked = []
    client = offline_client(10.0, brain=lambda v, plan: asked.append(v) or {"kind": "reply", "text": "x"})
    with pytest.raises(BacktestError, match="unknown prompt version"):
        await run(constructed_rows(), "2019-01-01", client)
    assert asked == []


def digest(engine: sa.Engine) -> str:
    """Every row of every table of a database, hashed."""
    parts = []
    with engine.connect() as conn:
        for name in sorted(sa.inspect(engine).get_table_names()):
            rows = conn.execute(sa.text(f'SELECT * FROM "{name}"')).fetchall()
            parts.append(json.dumps([name, sorted(json.dumps(list(r), default=str) for r in rows)]))
    return hashlib.sha256("".join(parts).encode()).hexdigest()


async def test_from_the_journal_with_benchmark_plans_and_nothing_is_written(tmp_path):
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'sor.sqlite'}", journal_url=f"sqlite:///{tmp_path / 'j.sqlite'}",
                        data_dir=tmp_path, anthropic_api_key=None)
    with pytest.raises(BacktestError, match="no decision log"):
        load_decisions(settings)
    assert not (tmp_path / "j.sqlite").exists()  # looking did not create one
    journal = JournalStore(settings.resolved_journal_url())
    for r in constructed_rows():
        journal.record_model_call(ModelCallRecord(**r.model_dump(exclude={"verdict", "rule", "reason", "outcome"})))
        journal.record_turn(TurnRecord(conversation_id=r.conversation_id, verdicts=[
            VerdictRecord(turn=r.turn, call_seq=r.call_seq, verdict=Verdict(r.verdict), rule=r.rule, at=T0)]))
    late = row("c-late", CANCEL, Verdict.SHOWN.value, view(f"please cancel {PENDING}", PENDING, "c-late"),
               at=T0 + timedelta(days=3))
    journal.record_model_call(ModelCallRecord(**late.model_dump(exclude={"verdict", "rule", "reason", "outcome"})))
    # a benchmark conversation: its plan makes the stand-in follow the plan, not the rules
    plans = PlanBook(sa.create_engine(settings.resolved_database_url()))
    plans.create_schema()
    plans.put("c-cancel", {"user": {"email": data()["users"][RAJ]["email"]},
                           "actions": [{"name": "get_order_details", "kwargs": {"order_id": DELIVERED}}]})
    before = (digest(journal.engine), digest(plans.engine))

    rows = load_decisions(settings)
    assert [r.conversation_id for r in rows] == ["c-cancel", "c-delivered", "c-late", "c-malformed", "c-return",
                                                 "c-superseded"]
    assert [r.conversation_id for r in load_decisions(settings, since=T0 + timedelta(days=1))] == ["c-late"]
    assert [r.conversation_id for r in load_decisions(settings, conversation_id="c-return")] == ["c-return"]
    client, model = model_client(settings, None)
    assert model == settings.offline_model_name
    report = await run(rows, PROMPT_VERSION, client)
    by_id = {r.conversation_id: r for r in report.rows}
    # the plan (read the delivered order) wins over the rules (cancel): a different proposal, same class
    assert by_id["c-cancel"].new_proposal == call("get_order_details", order_id=DELIVERED)
    assert by_id["c-cancel"].result is Difference.DIFFERENT_PROPOSAL
    assert by_id["c-late"].recorded_verdict == ACCEPTED and by_id["c-late"].result is Difference.SAME  # no verdict yet
    assert (digest(journal.engine), digest(plans.engine)) == before
