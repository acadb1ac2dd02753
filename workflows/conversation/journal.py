"""A conversation's journal records, collected in workflow memory and sent once per turn.

``JournalLog`` lives in the workflow object, never in the state (the state is carried through
continue-as-new and must stay small). It hears what happened from the events the transitions
record (``record``: ``workflows.domain.transitions.Event``, the mapping below): during a turn
it numbers the model calls (the ``call_seq`` of each ``ModelRequest``) and notes each call's
verdict and each transcript entry; ``flush`` sends them with one ``record_turn`` activity
call. Every record is keyed by (conversation, turn, sequence number), all deterministic, so a
retried activity, a replay or a reset re-running the turn writes the same keys again.

Events (``workflows.domain.journal``): the same transitions' events, turned into the public
events callers read (``_event``), ride in the same record and the same activity call; a
record is sent only when it holds rows (a flush with events alone waits for the next one,
so the activity calls, and the workflow's commands, are those of the journal without
events). ``conversation.ended`` goes last in its record (an escalation reports its unknown
outcome before it).

A write's later stages (confirmed, declined, executed, cancelled) name the turn that proposed
it (``keys.operation_turn`` of its operation id), with no ``call_seq``: its call was that
turn's last.

Transcript numbering: a user turn's message is entry 0, each text the user is then shown
(the reply, a notice told between turns, the cancellation summary) the next one. A new run
(continue-as-new) carries no memory, so it resumes the numbering of the current turn from
the state's window of recent turns, which holds every entry of that turn: a run continues
as new only right after answering a turn, when the turn holds its message and its reply.

Deterministic workflow code: ``clock`` is ``workflow.now`` (tests of the record shaping
pass their own).
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any, Callable, Optional

from temporalio import workflow

from workflows.activity_api import JournalActivitiesApi
from workflows.domain import journal as ev
from workflows.domain.actions import call_arguments
from workflows.domain import transitions as tr
from workflows.domain.catalogue.memory import FORGET_TOOL, REMEMBER_TOOL
from workflows.domain.keys import operation_turn
from workflows.domain.policy.approvals import ApprovalStatus
from workflows.domain.policy.clauses import Rule
from workflows.domain.contracts import Outcome
from workflows.domain.journal import EntryKind, Role, TranscriptRecord, TurnRecord, Verdict, VerdictRecord
from workflows.journal_write import write_journal
from workflows.domain.state import ConversationState, ConversationStatus

MEMORY_EVENTS = {REMEMBER_TOOL: ev.EventType.MEMORY_REMEMBERED, FORGET_TOOL: ev.EventType.MEMORY_FORGOTTEN}
"""The memory writes and the event each records once it applied (``docs/events.md``)."""

__all__ = ["JournalLog", "operation_turn"]

BUDGET_RULE = "token-budget"
"""The rule of the verdict on a model call the token budget refused."""


class JournalLog:
    """The records of the turn in progress. ``clock()`` gives the time of each record."""

    def __init__(self, state: ConversationState, clock: Callable[[], datetime] = workflow.now,
                 tenant: Optional[str] = None) -> None:
        self._clock = clock
        self._tenant = tenant
        """The conversation's tenant (its ``Tenant`` search attribute), carried by every record."""
        self._state = state
        """The conversation's state (the same object for the whole run): the ids, tools and
        amounts the events carry."""
        self._events: list[ev.EventRecord] = []
        self._ended: Optional[ev.EventRecord] = None
        """``conversation.ended`` noted, sent after the other events of its record."""
        self.turn = state.turn
        self.calls = 0
        """Model calls made so far in user turn ``turn`` (by this run)."""
        self._seq = sum(1 for t in state.recent_turns if t.turn == state.turn) - 1
        self._verdicts: list[VerdictRecord] = []
        self._entries: list[TranscriptRecord] = []
        self._turn_complete = False
        self._withdrawn_told: set[str] = set()
        self._presumed: Optional[TurnRecord] = None
        """The record a model call wrote with its reply (``model_wrote``), until the next ``take``."""
        self._given: Optional[TurnRecord] = None
        """The record given to the model call in flight (``for_model``)."""
        self._writing: Optional[asyncio.Task[None]] = None
        """The last record's write, in the background: the next turn does not wait for the
        journal (a journal that is down would otherwise hold up every message)."""

    # --- what happened ----------------------------------------------------------------

    def record(self, event: tr.Event) -> None:
        """Note the journal's rows and the public events for ``event`` (none for events it
        does not keep)."""
        self._event(event)
        match event:
            case tr.MessageReceived(turn=turn, text=text, message_id=message_id):
                self.user_message(turn, text, message_id)
            case tr.MessageRefused(text=text, message_id=message_id, reply=reply):
                self._entry(Role.USER, EntryKind.MESSAGE, text, message_id)
                self.said(reply)
            case tr.Said(text=text, kind=kind):
                self.said(text, kind)
            case tr.ModelAsked():
                self.next_call()
            case tr.ModelAnswered(written_reply=text) if text is not None:
                self.model_wrote(self._given, text)
            case tr.ModelCallCancelled():
                self.call_verdict(Verdict.CANCELLED, Rule.CANCELLED.value, "the model call was cancelled")
            case tr.ModelFailed(rule=rule, reason=reason):
                self.call_verdict(Verdict.MALFORMED, rule, reason)
            case tr.BudgetRefused(reason=reason):
                self.call_verdict(Verdict.TRANSFERRED, BUDGET_RULE, reason)
            case tr.ProposalRejected(rule=rule, reason=reason):
                self.call_verdict(Verdict.REJECTED, rule, reason)
            case tr.ProposalSuperseded(rule=rule, reason=reason):
                self.call_verdict(Verdict.SUPERSEDED, rule, reason)
            case tr.ReplyAccepted():
                self.call_verdict(Verdict.REPLIED)
            case tr.EndAccepted():
                self.call_verdict(Verdict.ENDED)
            case tr.TransferAccepted():
                self.call_verdict(Verdict.TRANSFERRED)
            # a read the model did not propose alone has no verdict of its own: a state-driven
            # read was asked by no call, and a batch's call gets one verdict (BatchRan)
            case tr.ReadRan(outcome=outcome, by_model=True):
                self.call_verdict(Verdict.READ_RAN, outcome=outcome)
            case tr.ReadFailed(rule=rule, reason=reason, by_model=True):
                self.call_verdict(Verdict.READ_RAN, rule, reason, Outcome.UNKNOWN)
            case tr.BatchJudged(ran=ran, refused=refused, unavailable=unavailable):
                self.call_verdict(Verdict.READ_RAN if ran else Verdict.REJECTED,
                                  Rule.TOOL_ERROR.value if unavailable else None,
                                  f"{ran} read(s) ran together, {refused} call(s) refused",
                                  Outcome.UNKNOWN if unavailable else (Outcome.APPLIED if ran else None))
            case tr.ReadCancelled(by_model=True):
                self.call_verdict(Verdict.CANCELLED, Rule.CANCELLED.value, "the read was cancelled")
            case tr.WriteShown():
                self.call_verdict(Verdict.SHOWN)
            case tr.WriteAwaitingApproval(operation_id=op):
                self._write_verdict(op, Verdict.CONFIRMED, Rule.AWAITING_APPROVAL.value)
            case tr.WriteDeclined(operation_id=op, rule=rule, reason=reason):
                self._write_verdict(op, Verdict.DECLINED, rule, reason)
            case tr.WriteDone(operation_id=op, outcome=outcome, result=result):
                rule = None if outcome is Outcome.APPLIED else Rule.TOOL_ERROR.value
                self._write_verdict(op, Verdict.EXECUTED, rule, result, outcome)
            case tr.WriteCancelled(operation_id=op, reason=reason):
                self._write_verdict(op, Verdict.CANCELLED, Rule.CANCELLED.value, reason)
            case tr.Closed(status=ConversationStatus.CANCELLED, unrun=unrun):
                # the shown write and the writes awaiting a supervisor will not run
                for op in unrun:
                    self._write_verdict(op, Verdict.CANCELLED, Rule.CANCELLED.value, "the conversation was cancelled")
                    self._withdrawn_told.add(op)

    # --- public events ----------------------------------------------------------------

    def _event(self, event: tr.Event) -> None:
        state, cid = self._state, self._state.conversation_id
        match event:
            case tr.RunStarted():
                # every run says it; the store keeps the first (the key is the same)
                self._emit(ev.started_key(), ev.EventType.CONVERSATION_STARTED, {})
            case tr.WriteShown(operation_id=op):
                self._emit(ev.operation_key(op, ev.EventType.CONFIRMATION_REQUESTED),
                           ev.EventType.CONFIRMATION_REQUESTED, self._operation(op))
            case tr.WriteAwaitingApproval(approval_id=approval_id):
                approval = next((a for a in state.approvals if a.approval_id == approval_id), None)
                if approval is not None:
                    expires = getattr(approval, "expires_at", None)
                    self._approval(approval, ev.EventType.APPROVAL_REQUESTED,
                                   {"expires_at": expires.isoformat() if expires else None})
            case tr.WriteDone(operation_id=op, outcome=outcome):
                self._decided(op)
                kind = {Outcome.APPLIED: ev.EventType.OPERATION_APPLIED,
                        Outcome.REFUSED: ev.EventType.OPERATION_REFUSED,
                        Outcome.UNKNOWN: ev.EventType.OPERATION_UNKNOWN}[outcome]
                data = self._operation(op)
                if outcome is Outcome.REFUSED:
                    data["rule"] = Rule.TOOL_ERROR.value
                self._emit(ev.operation_key(op, kind), kind, data)
                if outcome is Outcome.APPLIED:
                    self._memory_changed(op)
            case tr.WriteDeclined(operation_id=op):
                self._decided(op)  # a supervisor's rejection or an expiry; a user's no is not an event
            case tr.WriteCompensated(operation_id=op):
                self._emit(ev.operation_key(op, ev.EventType.OPERATION_COMPENSATED),
                           ev.EventType.OPERATION_COMPENSATED, self._operation(op))
            case tr.TicketOpened(ticket_key=ticket_key, operation_id=op):
                # the ticket's id, never its key (a key may name the customer)
                ticket = ev.ticket_id(ticket_key)
                self._emit(ev.ticket_key(ticket), ev.EventType.TICKET_OPENED,
                           {"ticket_id": ticket, "reason": ev.ticket_reason(ticket_key),
                            **({"operation_id": op} if op is not None else {})})
            case tr.Closed(status=status):
                for approval in state.approvals:
                    if approval.status is ApprovalStatus.WITHDRAWN:
                        self._approval(approval, ev.EventType.APPROVAL_WITHDRAWN, {})
                self._ended = ev.EventRecord(key=ev.with_epoch(ev.ended_key(state.turn, len(state.resolutions)),
                                                               state.reset_epoch),
                                             type=ev.EventType.CONVERSATION_ENDED, at=self._clock(),
                                             data={"conversation_id": cid, "status": status.value})

    def _emit(self, key: str, kind: ev.EventType, data: dict[str, Any]) -> None:
        # past a reset point the same fact is a new event (``ev.with_epoch``)
        self._events.append(ev.EventRecord(key=ev.with_epoch(key, self._state.reset_epoch), type=kind, at=self._clock(),
                                           data={"conversation_id": self._state.conversation_id, **data}))

    def _operation(self, operation_id: str) -> dict[str, Any]:
        # the tool and the order, never the write's detail (it may name an address or a card)
        data: dict[str, Any] = {"operation_id": operation_id}
        step = next((s for s in self._state.steps if s.operation_id == operation_id), None)
        if step is not None:
            data["tool"] = step.name
        approval = next((a for a in self._state.approvals if a.operation_id == operation_id), None)
        if approval is not None:
            data.update(_approval_data(approval))
            del data["status"]
            return data
        state = self._state
        try:  # the order the write is about, from its call (a write without one has none)
            calls = [c.call for c in [state.pending_confirmation, *state.awaiting_approval]
                     if c is not None and c.operation_id == operation_id]
            arguments = [o.arguments for o in state.completed_operations
                         if o.operation_id == operation_id] or [call_arguments(c) for c in calls]
        except Exception:  # noqa: BLE001 (an event without its order beats a failed workflow task)
            arguments = []
        order_id = next((a.get("order_id") for a in arguments if isinstance(a, dict) and a.get("order_id")), None)
        if order_id is not None:
            data["order_id"] = order_id
        return data

    def _memory_changed(self, operation_id: str) -> None:
        # a memory write that applied is also a memory event: the kind, never the value
        done = next((o for o in reversed(self._state.completed_operations) if o.operation_id == operation_id), None)
        kind = MEMORY_EVENTS.get(done.tool) if done is not None else None
        if done is None or kind is None:
            return
        self._emit(ev.operation_key(operation_id, kind), kind,
                   {"operation_id": operation_id, "kind": str(done.arguments.get("kind", ""))})

    def _approval(self, approval: Any, kind: ev.EventType, extra: dict[str, Any]) -> None:
        self._emit(ev.approval_key(approval.approval_id, kind), kind, {**_approval_data(approval), **extra})

    def _decided(self, operation_id: str) -> None:
        # a supervisor's decision (or its expiry) is settled by the write that follows it
        approval = next((a for a in self._state.approvals if a.operation_id == operation_id), None)
        if approval is None:
            return
        if approval.status in (ApprovalStatus.APPROVED, ApprovalStatus.REJECTED):
            decided_at = getattr(approval, "decided_at", None)
            self._approval(approval, ev.EventType.APPROVAL_DECIDED, {
                "decision": "approved" if approval.status is ApprovalStatus.APPROVED else "rejected",
                "decided_at": decided_at.isoformat() if decided_at else None})
        elif approval.status is ApprovalStatus.EXPIRED:
            self._approval(approval, ev.EventType.APPROVAL_EXPIRED, {})

    def _events_so_far(self) -> list[ev.EventRecord]:
        return [*self._events, *([self._ended] if self._ended is not None else [])]

    # --- transcript -------------------------------------------------------------------

    def user_message(self, turn: int, text: str, message_id: Optional[str]) -> None:
        """User turn ``turn`` begins with ``text`` (client message id ``message_id``)."""
        self.turn, self.calls, self._seq = turn, 0, -1
        self._entry(Role.USER, EntryKind.MESSAGE, text, message_id)
        self._turn_complete = True

    def said(self, text: str, kind: EntryKind = EntryKind.REPLY) -> None:
        """The user was shown ``text`` (a reply, a notice, the cancellation summary)."""
        self._entry(Role.ASSISTANT, kind, text, None)

    def _entry(self, role: Role, kind: EntryKind, text: str, message_id: Optional[str]) -> None:
        self._seq += 1
        if role is Role.ASSISTANT:
            self._events.append(ev.replied(self._state.conversation_id, self.turn, self._seq, kind.value,
                                           self._clock(), self._state.reset_epoch))
        self._entries.append(TranscriptRecord(turn=self.turn, seq=self._seq, role=role, kind=kind, text=text,
                                              message_id=message_id, at=self._clock()))

    # --- verdicts ---------------------------------------------------------------------

    def next_call(self) -> int:
        """The ``call_seq`` of the next model call of this turn (from 1)."""
        self.calls += 1
        return self.calls

    def call_verdict(self, verdict: Verdict, rule: Optional[str] = None, reason: Optional[str] = None,
                     outcome: Optional[Outcome] = None) -> None:
        """The verdict on the proposal of this turn's latest model call."""
        self._verdict(self.turn, self.calls, verdict, rule, reason, outcome)

    def _write_verdict(self, operation_id: str, verdict: Verdict, rule: Optional[str] = None,
                       reason: Optional[str] = None, outcome: Optional[Outcome] = None) -> None:
        """A later stage of the write ``operation_id``: shown at the end of the turn that proposed
        it, so its call is that turn's last (``call_seq`` None)."""
        try:
            turn = operation_turn(operation_id)
        except ValueError:
            return  # not one of ours (never expected): a missing verdict beats a stalled run
        self._verdict(turn, None, verdict, rule, reason, outcome)

    def _withdrawn(self, state: ConversationState) -> None:
        # a transfer, an end or an escalation withdraws writes awaiting a supervisor (close());
        # their approvals say so, and their operation ids name the proposing turn
        for approval in state.approvals:
            if approval.status is ApprovalStatus.WITHDRAWN and approval.operation_id not in self._withdrawn_told:
                self._withdrawn_told.add(approval.operation_id)
                self._write_verdict(approval.operation_id, Verdict.CANCELLED, Rule.CANCELLED.value, approval.note)

    def _verdict(self, turn: int, call_seq: Optional[int], verdict: Verdict, rule: Optional[str],
                 reason: Optional[str], outcome: Optional[Outcome]) -> None:
        self._verdicts.append(VerdictRecord(turn=turn, call_seq=call_seq, verdict=verdict, rule=rule,
                                            reason=reason[:2000] if reason else reason,
                                            outcome=outcome.value if outcome else None, at=self._clock()))

    # --- the record a model call writes with its reply ---------------------------------

    def for_model(self, state: ConversationState) -> tuple[int, Optional[TurnRecord]]:
        """The journal's part of the model call just asked (``ModelAsked``): its ``call_seq``,
        and the record so far of the user turn in progress (``ModelRequest.journal``), which the
        call writes when it proposes a reply: the turn's own write is then skipped when the
        record it would send is the one written (one history event less per turn). The record
        is None when earlier records are still being written (records go in turn order) or the
        turn began before the last record."""
        if not self._turn_complete or (self._writing is not None and not self._writing.done()):
            self._given = None
        else:
            self._given = self.so_far(state)
        return self.calls, self._given

    def so_far(self, state: ConversationState) -> TurnRecord:
        """What ``take`` would return now for the user turn in progress, without forgetting it."""
        return TurnRecord(conversation_id=state.conversation_id, tenant=self._tenant,
                          customer_id=state.customer.user_id if state.customer else None, turn=self.turn,
                          model_calls=self.calls, verdicts=list(self._verdicts), transcript=list(self._entries),
                          events=self._events_so_far(), reset_epoch=state.reset_epoch)

    def failed(self, run_id: str, rule: str) -> TurnRecord:
        """The record of a run that fails itself (``rule``: why, e.g. ``state-incompatible``: its
        input state could not be loaded): ``conversation.ended`` with status ``failed``, alone."""
        state = self._state
        return TurnRecord(conversation_id=state.conversation_id, reset_epoch=state.reset_epoch, events=[
            ev.EventRecord(key=ev.with_epoch(ev.failed_key(run_id), state.reset_epoch),
                           type=ev.EventType.CONVERSATION_ENDED, at=self._clock(),
                           data={"conversation_id": state.conversation_id, "status": "failed", "rule": rule})])

    def model_wrote(self, record: Optional[TurnRecord], text: str) -> None:
        """The model call given ``record`` wrote it completed by its reply ``text``."""
        if record is not None:
            self._presumed = record.with_reply(self.calls, text, self._clock())

    # --- sending ----------------------------------------------------------------------

    def take(self, state: ConversationState) -> Optional[TurnRecord]:
        """The record of everything noted since the last one (None when nothing was), and
        forget it. It completes user turn ``turn`` when that turn began since the last record."""
        if not state.is_open():
            self._withdrawn(state)
        presumed, self._presumed = self._presumed, None
        if not self._verdicts and not self._entries:
            return None
        record = TurnRecord(conversation_id=state.conversation_id, tenant=self._tenant,
                            customer_id=state.customer.user_id if state.customer else None,
                            turn=self.turn if self._turn_complete else None,
                            model_calls=self.calls if self._turn_complete else 0,
                            verdicts=self._verdicts, transcript=self._entries, events=self._events_so_far(),
                            reset_epoch=state.reset_epoch)
        self._verdicts, self._entries, self._turn_complete = [], [], False
        self._events, self._ended = [], None
        if presumed is not None and presumed.same_rows(record):
            return None  # the model call that proposed the reply wrote exactly this
        return record

    def flush(self, state: ConversationState) -> None:
        """Send what was noted (one ``record_turn`` call; nothing when nothing was noted) in
        the background, after the records before it (the store trims turns after the one
        it records, which is right only in turn order); ``drain`` waits for them.

        If the journal stays down past ``JOURNAL_GIVE_UP``, or refuses the record's data, the
        record is dropped with a warning and the conversation goes on: the journal is an
        audit record kept beside the process, and the state and the workflow history still
        hold every decision; a conversation that stalled on it would fail the customer."""
        record = self.take(state)
        if record is None:
            return
        before = self._writing

        async def write() -> None:
            if before is not None:
                await before
            await self.send(record)
        self._writing = asyncio.ensure_future(write())

    def resend(self, record: TurnRecord) -> None:
        """Write ``record`` (carried over continue-as-new) before anything this run sends."""
        self._writing = asyncio.ensure_future(self.send(record))

    async def drain(self) -> None:
        """Wait until every record sent so far is written or dropped: before continue-as-new
        and before the run ends (a write still in flight then would be lost)."""
        if self._writing is not None:
            await self._writing

    async def send(self, record: TurnRecord) -> None:
        """Write ``record`` (one ``record_turn`` call; see ``flush``): as a local activity first
        (one marker event instead of an activity's three events and the workflow task its
        completion needs), then, when the journal's database did not answer it, as an activity
        retried in the background."""
        summary = f"journal: turn {record.turn if record.turn is not None else self.turn}"
        # ids and counts only: the record holds the user's words
        await write_journal(JournalActivitiesApi.record_turn, record, summary,
                            f"journal record of turn {record.turn} ({len(record.verdicts)} verdicts, "
                            f"{len(record.transcript)} entries)")


def _approval_data(approval: Any) -> dict[str, Any]:
    # what an approval's events carry; read with defaults: building an event must never fail
    # the workflow task (a record without a field beats a stalled conversation)
    amount = getattr(approval, "amount", None)
    status = getattr(approval, "status", None)
    return {"approval_id": approval.approval_id, "operation_id": getattr(approval, "operation_id", None),
            "tool": getattr(approval, "tool", None), "order_id": getattr(approval, "order_id", None),
            "amount": str(amount) if amount is not None else None,
            "status": status.value if status is not None else None}

