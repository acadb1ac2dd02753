"""The journal of real conversations (real Temporal dev server, real worker, SQLite journal):
one ``model_calls`` row per model call with the verdict the state shows (rejections with
their rule, executed writes with their outcome); the transcript holds every user message
with its message id and every text the user was shown, in order, across continue-as-new,
approval notices and a cancel; a retried message adds nothing; a journal that fails, refuses
or is down never stops or holds up the conversation (the next message is answered promptly
while ``record_turn`` fails, a worker starts with the journal's database unreachable); and
after a reset the transcript holds only the new timeline's turns.

The model is the offline stand-in (its rules brain understands these plain requests),
behind a brain that first proposes one read before authentication (refused:
authenticate-first).
"""

from __future__ import annotations

import asyncio
import time
import uuid

import sqlalchemy.exc

from activities.store.journal import JournalStore
from systems.model.server import offline_brain
from tests.policy_fixtures import CUSTOMER, DELIVERED_2, EMAIL, PENDING
from tests.workflow_harness import NO_APPROVALS, call, running_worker, until
from workflows.conversation.workflow import SupportWorkflow
from workflows.domain.contracts import SupportInput
from workflows.domain.policy.approvals import ApprovalPolicy
from workflows.domain.prompt import PROMPT_VERSION


class ReadBeforeAuth:
    """The first proposal reads an order before the customer is authenticated (refused by
    the policy); then the offline model answers."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, view: dict, plan: dict | None = None) -> dict:
        self.calls += 1
        return call("get_order_details", order_id=DELIVERED_2) if self.calls == 1 else offline_brain(view, plan)


def journal_of(settings) -> JournalStore:
    return JournalStore(settings.resolved_journal_url())


def _rows(journal: JournalStore, cid: str) -> list[tuple]:
    return [(e.turn, e.seq, e.role, e.kind, e.message_id, e.text) for e in journal.transcript(cid)]


async def test_decisions_match_the_state_and_the_transcript_holds_every_message(temporal_env, settings):
    # the email comes in the second message: an email in a message authenticates the customer
    # before the model is asked, and turn 1's first proposal is to be made before that
    async with running_worker(temporal_env, settings, brain=ReadBeforeAuth()) as (client, backend):
        cid = await client.start_conversation(f"journal-{uuid.uuid4().hex[:6]}")
        texts = ["Hi, I need help with one of my orders", f"My email is {EMAIL}",
                 f"Please cancel order {PENDING}, I ordered it by mistake", "yes"]
        replies = [await client.send_message(cid, text, message_id=f"m-{i}") for i, text in enumerate(texts, 1)]
        again = await client.send_message(cid, texts[2], message_id="m-3")  # a client's retry
        assert again == replies[2] and replies[2].awaiting_confirmation
        state = await client.state(cid)
    journal = journal_of(settings)
    rows = journal.decisions(conversation_id=cid)
    # one row per model call, numbered from 1 in each turn, each with its verdict
    assert len(rows) == state.usage.model_calls >= 4
    for turn in (1, 2, 3, 4):
        assert [r.call_seq for r in rows if r.turn == turn] == list(range(1, 1 + sum(r.turn == turn for r in rows)))
    assert all(r.verdict for r in rows), [(r.turn, r.call_seq, r.verdict) for r in rows]
    assert all(r.prompt_version == PROMPT_VERSION and r.model == "test-brain" and r.view["turn"] == r.turn
               and r.stop_reason == "tool_use" and r.input_tokens > 0 for r in rows)
    # the rejection in the state, with its rule, is the verdict on the call that proposed it
    assert [(r.turn, r.call_seq, r.rule) for r in rows if r.verdict == "rejected"] == [(1, 1, "authenticate-first")]
    assert [(x.turn, x.rule) for x in state.rejections] == [(1, "authenticate-first")]
    assert rows[0].proposal["tool"]["name"] == "get_order_details" and rows[0].customer_id is None
    # the write: shown at the end of turn 3, confirmed in turn 4, executed with its outcome
    [op] = state.completed_operations
    [executed] = [r for r in rows if r.verdict == "executed"]
    assert (executed.turn, executed.outcome, executed.proposal["tool"]["name"]) == (3, "applied", op.tool)
    assert op.ok and op.operation_id.endswith(".t3")
    assert executed.call_seq == max(r.call_seq for r in rows if r.turn == 3)
    assert {r.verdict for r in rows if r.verdict not in ("rejected", "executed")} <= {"read_ran", "replied"}
    for turn in (1, 2):
        assert [r.verdict for r in rows if r.turn == turn][-1] == "replied"
    # the yes: the workflow words the write's outcome, no model call (no row of turn 4)
    assert [r for r in rows if r.turn == 4] == [] and replies[3].text.startswith("Your request is done:")
    assert {r.customer_id for r in rows if r.turn in (2, 3)} == {CUSTOMER}
    # the transcript: every message with its id (the update id: the client's "msg-" + message id)
    # and every reply, in order; the retry added nothing
    assert _rows(journal, cid) == [
        (1, 0, "user", "message", "msg-m-1", texts[0]), (1, 1, "assistant", "reply", None, replies[0].text),
        (2, 0, "user", "message", "msg-m-2", texts[1]), (2, 1, "assistant", "reply", None, replies[1].text),
        (3, 0, "user", "message", "msg-m-3", texts[2]), (3, 1, "assistant", "reply", None, replies[2].text),
        (4, 0, "user", "message", "msg-m-4", texts[3]), (4, 1, "assistant", "reply", None, replies[3].text)]
    times = [e.at for e in journal.transcript(cid)]
    assert times == sorted(times)
    assert journal.decisions(rule="authenticate-first", customer_id=None)[0].conversation_id == cid
    journal.close()


async def test_the_journal_survives_continue_as_new(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, _):
        cid = f"journal-can-{uuid.uuid4().hex[:6]}"
        handle = await temporal_env.client.start_workflow(
            SupportWorkflow.run, SupportInput(conversation_id=cid, max_turns_per_run=2, approvals=NO_APPROVALS),
            id=f"support-{cid}", task_queue=settings.task_queue)
        texts = [f"Hi, my email is {EMAIL}", f"What is the status of order {PENDING}?",
                 f"Please cancel order {PENDING}, no longer needed", "yes", "thanks"]
        replies = [await client.send_message(cid, t, message_id=f"can-{i}") for i, t in enumerate(texts, 1)]
        state = await client.state(cid)
        description = await handle.describe()
        assert description.run_id != handle.first_execution_run_id, "no continue-as-new: the test is vacuous"
    journal = journal_of(settings)
    expected = []
    for turn, (text, reply) in enumerate(zip(texts, replies), 1):
        expected += [(turn, 0, "user", "message", f"msg-can-{turn}", text), (turn, 1, "assistant", "reply", None, reply.text)]
    # turn 2's record was carried into the second run and written there
    await until(lambda: len(journal.transcript(cid)) == len(expected), "the last turn's record")
    assert _rows(journal, cid) == expected
    rows = journal.decisions(conversation_id=cid)
    assert len(rows) == state.usage.model_calls and all(r.verdict for r in rows)
    assert [(r.turn, r.outcome) for r in rows if r.verdict == "executed"] == [(3, "applied")]
    journal.close()


async def test_an_approval_notice_is_in_the_transcript(temporal_env, settings):
    async with running_worker(temporal_env, settings, approvals=ApprovalPolicy()) as (client, _):
        cid = await client.start_conversation(f"journal-appr-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}", message_id="a-1")
        await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake", message_id="a-2")
        told = await client.send_message(cid, "yes", message_id="a-3")
        assert told.awaiting_approval
        journal = journal_of(settings)

        def verdicts_on_the_write():
            return [(r.turn, r.verdict, r.rule, r.outcome) for r in journal.decisions(conversation_id=cid)
                    if r.proposal and r.proposal.get("tool", {}).get("name") == "cancel_pending_order"]
        # the turn's record is written just after its reply
        await until(lambda: verdicts_on_the_write() == [(2, "confirmed", "awaiting-approval", None)], "confirmed")
        await client.decide_approval(told.awaiting_approval, "approve", "sup-ana")
        await until(lambda: any(e.kind == "notice" for e in journal.transcript(cid)), "the approval notice")
        [notice] = [e for e in journal.transcript(cid) if e.kind == "notice"]
        assert (notice.turn, notice.seq, notice.role) == (3, 2, "assistant")
        assert notice.text.startswith("A supervisor approved your request")
        assert verdicts_on_the_write() == [(2, "executed", None, "applied")]
    journal.close()


async def test_a_cancel_while_a_write_awaits_confirmation_is_in_the_transcript(temporal_env, settings):
    async with running_worker(temporal_env, settings) as (client, _):
        other = await client.start_conversation(f"journal-cancel-{uuid.uuid4().hex[:6]}")
        await client.send_message(other, f"Hi, my email is {EMAIL}", message_id="c-1")
        shown = await client.send_message(other, f"Please cancel order {PENDING}, I ordered it by mistake",
                                          message_id="c-2")
        assert shown.awaiting_confirmation
        await client.cancel(other, "customer hung up")
        await client.outcome(other)
    journal = journal_of(settings)
    entries = journal.transcript(other)
    assert [(e.turn, e.seq, e.kind) for e in entries] == [(1, 0, "message"), (1, 1, "reply"), (2, 0, "message"),
                                                          (2, 1, "reply"), (2, 2, "cancellation")]
    assert entries[-1].text.startswith("The conversation was cancelled.")
    [cancelled] = [r for r in journal.decisions(conversation_id=other) if r.verdict == "cancelled"]
    assert (cancelled.turn, cancelled.rule, cancelled.proposal["tool"]["name"]) == (2, "conversation-cancelled",
                                                                                    "cancel_pending_order")
    journal.close()


class FlakyJournal(JournalStore):
    """A journal whose ``record_turn`` fails ``failures`` times (the database is down), then
    works; or, with ``bad_data``, always refuses the data."""

    def __init__(self, url: str, failures: int = 0, bad_data: bool = False) -> None:
        super().__init__(url)
        self.failures, self.bad_data, self.attempts = failures, bad_data, 0

    def _record_turn(self, conn, record):  # under record_turn and a reply's record_model_call
        self.attempts += 1
        if self.bad_data:
            raise sqlalchemy.exc.DataError("INSERT ...", {}, Exception("value too long"))
        if self.attempts <= self.failures:
            raise sqlalchemy.exc.OperationalError("INSERT ...", {}, Exception("connection refused"))
        return super()._record_turn(conn, record)


async def test_a_journal_that_is_down_for_a_while_gets_the_record_once(temporal_env, settings):
    journal = FlakyJournal(settings.resolved_journal_url(), failures=2)
    async with running_worker(temporal_env, settings, journal=journal) as (client, _):
        cid = await client.start_conversation(f"journal-flaky-{uuid.uuid4().hex[:6]}")
        reply = await client.send_message(cid, f"Hi, my email is {EMAIL}", message_id="f-1")
        await until(lambda: len(journal.transcript(cid)) == 2, "the retried record")
        await client.send_message(cid, "thanks", message_id="f-2")
        await until(lambda: len(journal.transcript(cid)) == 4, "the next record")
    assert journal.attempts == 4  # two failed attempts, then one per turn
    assert [e.text for e in journal.transcript(cid)][:2] == [f"Hi, my email is {EMAIL}", reply.text]


async def test_a_reply_turns_record_is_written_once_by_the_model_call_that_proposed_the_reply(temporal_env,
                                                                                              settings):
    journal = FlakyJournal(settings.resolved_journal_url())
    async with running_worker(temporal_env, settings, journal=journal) as (client, _):
        cid = await client.start_conversation(f"journal-once-{uuid.uuid4().hex[:6]}")
        first = await client.send_message(cid, f"Hi, my email is {EMAIL}", message_id="o-1")
        second = await client.send_message(cid, f"What is the status of order {PENDING}?", message_id="o-2")
        await until(lambda: len(journal.transcript(cid)) == 4, "both turns' records")
        state = await client.state(cid)
        history = await temporal_env.client.get_workflow_handle(f"support-{cid}").fetch_history()
    # the workflow made no record_turn call (local or not): each model call that replied wrote it
    assert not [e for e in history.events if b"record_turn" in e.SerializeToString()]
    assert journal.attempts == 2
    assert _rows(journal, cid) == [(1, 0, "user", "message", "msg-o-1", f"Hi, my email is {EMAIL}"),
                                   (1, 1, "assistant", "reply", None, first.text),
                                   (2, 0, "user", "message", "msg-o-2", f"What is the status of order {PENDING}?"),
                                   (2, 1, "assistant", "reply", None, second.text)]
    verdicts = [(r.turn, r.verdict) for r in journal.decisions(conversation_id=cid)]
    assert len(verdicts) == state.usage.model_calls  # a verdict per call, both turns ending in a reply
    assert [v for t, v in verdicts if t == 1][-1] == [v for t, v in verdicts if t == 2][-1] == "replied"


async def test_a_journal_that_refuses_the_data_never_stops_the_conversation(temporal_env, settings):
    journal = FlakyJournal(settings.resolved_journal_url(), bad_data=True)
    async with running_worker(temporal_env, settings, journal=journal) as (client, _):
        cid = await client.start_conversation(f"journal-bad-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        shown = await client.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
        assert shown.awaiting_confirmation
        told = await client.send_message(cid, "yes")
        state = await client.state(cid)
    assert [op.ok for op in state.completed_operations] == [True]
    assert told.text.startswith("Your request is done:")
    # never retried: once per turn by the workflow, and before that once by the model call of
    # each turn that ends in a model's reply (turn 1 only: turn 2 shows the write, and turn 3's
    # reply to the yes is worded by the workflow, with no model call)
    assert journal.attempts == 4
    assert journal.transcript(cid) == []
    # the model activity's own rows are written on their own path
    assert len(journal.decisions(conversation_id=cid)) == state.usage.model_calls


# --- A journal that is down, and resets ---

class DownJournal(JournalStore):
    """Writing a turn's record always fails as a database that does not answer (``record_turn``,
    and a reply's ``record_model_call`` with the turn)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.attempts = 0

    def _record_turn(self, conn, record):
        self.attempts += 1
        raise sqlalchemy.exc.OperationalError("INSERT ...", {}, Exception("connection refused"))


async def test_the_next_message_is_answered_promptly_while_the_journal_is_down(temporal_env, settings):
    journal = DownJournal(settings.resolved_journal_url())
    async with running_worker(temporal_env, settings, journal=journal) as (client, _):
        cid = await client.start_conversation(f"journal-down-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        started = time.monotonic()
        await client.send_message(cid, "What are my orders?")
        waited = time.monotonic() - started
    assert journal.attempts >= 1
    assert waited < 10, f"the second message waited {waited:.1f} s for the journal"


DEAD_JOURNAL = "postgresql+psycopg://postgres@127.0.0.1:9/journal"  # discard port: nothing listens


async def test_a_worker_starts_while_the_journal_is_unreachable(temporal_env, settings):
    """``build_worker`` opens ``JournalStore``, whose constructor creates the schema at once:
    with the journal's database unreachable at a (re)start the worker does not start, and
    every conversation stops, although the journal is only an audit record."""
    from starter.runtime.worker import build_worker
    down = settings.model_copy(update={"journal_url": DEAD_JOURNAL})
    try:
        build_worker(temporal_env.client, down)
    except Exception as err:  # noqa: BLE001
        raise AssertionError(f"no worker while the journal is down: {type(err).__name__}") from None


async def test_after_a_reset_the_transcript_holds_only_the_conversation_that_happened(temporal_env, settings):
    """An operator resets the conversation to just after turn 1 (messages not re-applied);
    the user then says something else. The discarded turns 2 and 3 of the old timeline leave
    the transcript (not only the re-run turn), which would otherwise show messages the
    conversation's state does not have, mixed with the new ones."""
    from tests.resets import message_points, reset_to, wait_for_turn
    from tests.workflow_harness import until
    from workflows.conversation.workflow import support_workflow_id
    async with running_worker(temporal_env, settings) as (client, _):
        cid = await client.start_conversation(f"journal-reset-{uuid.uuid4().hex[:6]}")
        await client.send_message(cid, f"Hi, my email is {EMAIL}")
        wid = support_workflow_id(cid)
        journal = JournalStore(settings.resolved_journal_url())
        await until(lambda: len(journal.transcript(cid)) == 2, "turn 1 recorded")
        await client.send_message(cid, "What is the status of order #W4566809?")
        await client.send_message(cid, "And my other orders?")
        after_turn_1 = (await message_points(temporal_env, wid))[-2]  # turn 2's: keeps turn 1
        await until(lambda: len(journal.transcript(cid)) == 6, "turns 2 and 3 recorded")
        await reset_to(temporal_env, wid, after_turn_1)
        await wait_for_turn(client, cid, 1)
        await client.send_message(cid, "Thanks, that's all")
        state = await client.state(cid)
        await asyncio.sleep(2)
    users = [e.text for e in journal.transcript(cid) if e.role == "user"]
    journal.close()
    assert users == [t.text for t in state.recent_turns if t.role.value == "user"], users
