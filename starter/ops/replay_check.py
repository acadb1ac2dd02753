"""The safe-replay decision: may a conversation's run be resumed — reset to
its last completed workflow task and run on — without any effect happening twice?

``check(client, conversation_id, systems)`` reads the run's history (``starter.ops.replay_history``)
and its refund children's, and asks the systems of every write it invoked:

- retail writes: the retail ledger by idempotency key (the system applies a key once: the
  effect and its ledger row commit together), and for writes that move money the payments
  service by ``pay:{key}`` (it honours ``Idempotency-Key``) and the dispatch log;
- emails and tickets: by their key where the retail side channels keep them (keyed), or by
  business reference in the email and ticketing services (which take no keys);
- reads, model calls and journal records are harmless to run again.

Each write is ``deduplicated`` (keyed in a system that honours the key, recorded in a
ledger, or found by reference), ``resolved`` (an operator resolved its unknown outcome),
``unknown`` (failed with ``OutcomeUnknown``, escalated, or dispatched without a recorded
result and the system cannot be asked) or ``unproven`` (e.g. no keys, no reference match).
The verdict is ``resume`` when the original input decodes, the run is not finished normally
and every write is deduplicated or resolved; else ``refuse``, with the reasons. Only the
current run is read (a reset re-runs nothing before a continue-as-new). ``starter.ops.replay_resume``
acts on a ``resume`` verdict, re-applying signals and updates after the reset point.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel
from temporalio.client import Client, WorkflowExecutionStatus

from activities.payments_port import payments_key
from starter.client.conversation_ids import conversation_named
from starter.client.errors import ConversationError
from starter.client.failure_words import failure_kind
from starter.ops.replay_history import Invoked, RunHistory, read_run
from starter.ops.replay_systems import Systems
from starter.runtime.system_of_record import SERVICES
from workflows.domain.actions import call_arguments
from workflows.domain.catalogue import spec_of
from workflows.domain.errors import ErrorType
from workflows.conversation.workflow import support_workflow_id

Status = Literal["deduplicated", "harmless", "resolved", "unknown", "unproven"]
SAFE = ("deduplicated", "harmless", "resolved")
FINISHED = {WorkflowExecutionStatus.COMPLETED: "completed", WorkflowExecutionStatus.CANCELED: "was cancelled",
            WorkflowExecutionStatus.CONTINUED_AS_NEW: "continued as new"}


class EffectReport(BaseModel):
    """One write the run (or a refund child) invoked: where, which key in which system, how
    its activity ended, what the systems hold, and its ``status`` with the ``reason``."""

    workflow_id: str
    event_id: int
    activity: str
    system: str
    key: Optional[str]
    ended: str
    failure_type: Optional[str] = None
    evidence: list[str] = []
    status: Status
    reason: str
    ledger: Optional[Literal["applied", "refused", "absent"]] = None
    """What the retail ledger holds under the key (None: not a retail write, or it could not be asked)."""
    money: Optional[Literal["moved", "absent"]] = None
    """What the payments service holds under ``pay:{key}`` (None: not asked, or no answer)."""


class ReplayReport(BaseModel):
    """The decision: ``verdict`` resume|refuse with ``reasons``; ``reset_event_id``: the last
    completed workflow task of run ``run_id`` (what ``resume`` resets to)."""

    conversation_id: str
    workflow_id: str
    run_id: Optional[str] = None
    run_status: Optional[str] = None
    input_known: bool = False
    input_problem: Optional[str] = None
    effects: list[EffectReport] = []
    harmless: dict[str, int] = {}  # activities that change nothing (or upsert by key), by type: how many ran
    verdict: Literal["resume", "refuse"] = "refuse"
    reasons: list[str] = []
    reset_event_id: Optional[int] = None
    history_length: Optional[int] = None  # events checked: ``resume`` refuses a run that has moved on since


def _ask(what: str, fn: Any) -> tuple[Any, Optional[str]]:
    """(answer, None), or (None, "<what> cannot be asked (<error kind>)")."""
    try:
        return fn(), None
    except Exception as err:  # noqa: BLE001 - any failure to answer: cannot tell
        return None, f"{what} cannot be asked ({failure_kind(err)})"


def _dispatched(systems: Systems, key: str) -> bool:
    """True when the dispatch log holds ``key`` as sent without a recorded result."""
    if systems.log is None:
        return False
    found, problem = _ask("the dispatch log", lambda: systems.log.status(key))
    return problem is None and found[0] == "dispatched"


def _effect(inv: Invoked, system: str, key: Optional[str], status: Status, reason: str,
            evidence: list[str]) -> EffectReport:
    return EffectReport(workflow_id=inv.workflow_id, event_id=inv.event_id, activity=inv.activity, system=system,
                        key=key, ended=inv.ended, failure_type=inv.failure_type, evidence=evidence, status=status,
                        reason=reason)


def _retail_write(inv: Invoked, systems: Systems, escalated: set[str], resolved: set[str]) -> EffectReport:
    req = inv.request
    key, tool = req.idempotency_key, req.call.name
    evidence: list[str] = []
    unknown: list[str] = []
    if key in escalated:
        unknown.append(f"escalated as unknown (ticket escalate:{key})")
    if inv.failure_type == ErrorType.OUTCOME_UNKNOWN.value:
        unknown.append("failed with OutcomeUnknown: the system could not say whether it took effect")
    recorded, problem = _ask("the retail ledger", lambda: systems.backend.recorded(
        req.store, tool, call_arguments(req.call), key))
    conflict = bool(problem and "IdempotencyKeyConflict" in problem)
    if conflict:
        evidence.append("the key holds another call in the retail ledger (a re-run is refused)")
        problem = None
    elif problem:
        evidence.append(problem)
    else:
        evidence.append("retail ledger: " + ("not recorded" if recorded is None else
                                             "recorded applied" if recorded.ok else "recorded refused"))
    money = None
    if systems.payments is not None and spec_of(tool).moves_money and (recorded is None or recorded.ok):
        pay = payments_key(key)
        found, asked = _ask("the payments service", lambda: systems.payments.find(pay))
        evidence.append(asked or f"payments {pay}: {'found' if found else 'absent'} (keys honoured)")
        money = None if asked else "moved" if found else "absent"
        if asked and _dispatched(systems, pay):
            unknown.append(f"payments: {pay} dispatched without a recorded result, and {asked}")
    ledger = None if problem or conflict else "absent" if recorded is None else "applied" if recorded.ok else "refused"
    report = _retail_verdict(inv, key, recorded, problem, evidence, unknown, resolved)
    report.ledger, report.money = ledger, money
    return report


def _retail_verdict(inv: Invoked, key: str, recorded: Any, problem: Optional[str], evidence: list[str],
                    unknown: list[str], resolved: set[str]) -> EffectReport:
    if ref_operation(key) in resolved:
        return _effect(inv, "retail", key, "resolved", "its unknown outcome was resolved by an operator", evidence)
    if unknown:
        return _effect(inv, "retail", key, "unknown", "; ".join(unknown), evidence)
    if problem:
        return _effect(inv, "retail", key, "unproven", problem, evidence)
    if recorded is None and inv.ended == "completed":
        return _effect(inv, "retail", key, "unproven", "it completed, but the retail ledger holds nothing under its "
                       "key (another database?)", evidence)
    return _effect(inv, "retail", key, "deduplicated",
                   "keyed: the retail system applies a key once (a re-run returns the recorded result)", evidence)


def _message(inv: Invoked, systems: Systems, worker_services: Optional[str] = None) -> EffectReport:
    req = inv.request
    email = inv.activity == "send_customer_email"
    key = req.message_key if email else req.ticket_key
    service = systems.outbox if email else systems.tickets
    system = "email" if email else "ticketing"
    if service is None:
        if worker_services is not None and worker_services[SERVICES.index(system)] != "-":
            # the worker sent it through the service: the retail side channel is no evidence
            reason = (f"the worker sends through the {system} service, and this command cannot ask it "
                      f"(STATEKEEPER_{system.upper()}_URL is not set)")
            return _effect(inv, system, key, "unproven", reason, [reason])
        # the retail side channels: one row per key (race-safe insert)
        rows, problem = _ask("the retail side channels", lambda: (
            systems.backend.outbox_messages(req.store) if email else systems.backend.tickets(req.store)))
        system = "retail outbox" if email else "retail tickets"
        if problem:
            return _effect(inv, system, key, "unproven", problem, [problem])
        found = sum(1 for r in rows if r["message_key" if email else "ticket_key"] == key)
        evidence = [f"{system}: {found} under its key"]
        if not found and inv.ended == "completed":
            return _effect(inv, system, key, "unproven", f"it completed, but the {system} hold nothing under its key "
                           "(sent through an external service this command cannot ask?)", evidence)
        return _effect(inv, system, key, "deduplicated", "keyed: recorded at most once per key", evidence)
    sent, problem = _ask(f"the {system} service", lambda: service.sent(key))
    if problem:
        status: Status = "unknown" if _dispatched(systems, f"{system}:{key}") else "unproven"
        return _effect(inv, system, key, status, f"no keys, and {problem}", [problem])
    evidence = [f"{system}: {len(sent)} found by reference"]
    if sent:
        return _effect(inv, system, key, "deduplicated", "found by reference: a re-run asks first and sends nothing",
                       evidence)
    if inv.ended == "completed":
        return _effect(inv, system, key, "unproven", "no keys, and no reference match for a send that completed",
                       evidence)
    if inv.ended == "in_flight":  # the attempt may still be running (a terminated run's activity is not stopped)
        return _effect(inv, system, key, "unproven", "no keys, and no reference match yet for a send still in "
                       "flight: it may land until its attempt's deadline; check again once it has ended", evidence)
    return _effect(inv, system, key, "deduplicated", "not sent (no reference match, and its attempt ended): "
                   "a re-run asks first", evidence)


def ref_operation(key: str) -> str:
    """The operation (``<conversation>.t<turn>``, its step id) of a write key ``{tool}:{subject}:{operation}``."""
    return key.split(":", 2)[-1]


def classify(runs: list[RunHistory], systems: Systems) -> tuple[list[EffectReport], dict[str, int]]:
    """The writes of ``runs`` (the conversation's run, then its children), classified, and
    the harmless activities counted by type."""
    escalated = {inv.request.ticket_key.removeprefix("escalate:") for run in runs for inv in run.invoked
                 if inv.activity == "open_ticket" and inv.request is not None
                 and inv.request.ticket_key.startswith("escalate:")}
    resolved = {step for run in runs for step in run.resolved_steps}
    effects, harmless = [], {}
    for run in runs:
        harmless["local activities (reads, journal)"] = harmless.get("local activities (reads, journal)", 0) + \
            run.local_activities
        for inv in run.invoked:
            if not inv.is_write:
                harmless[inv.activity] = harmless.get(inv.activity, 0) + 1
            elif inv.request is None:
                effects.append(_effect(inv, "?", None, "unproven", "its input does not decode", []))
            elif inv.activity == "run_write_tool":
                effects.append(_retail_write(inv, systems, escalated, resolved))
            else:
                effects.append(_message(inv, systems, run.services))
    return effects, {k: v for k, v in harmless.items() if v}


async def check(client: Client, conversation_id: str, systems: Systems) -> ReplayReport:
    """The ``ReplayReport`` of a conversation's current run (``conversation_id`` or its
    workflow id ``support-<id>``). Never raises for what it finds; ``RPCError`` when Temporal
    cannot be asked."""
    try:
        conversation_id = await conversation_named(client, conversation_id)
    except ConversationError:  # which conversation is meant is not known: nothing is judged
        return ReplayReport(conversation_id=conversation_id, workflow_id=support_workflow_id(conversation_id),
                            reasons=["no run of this conversation can be read: Temporal did not answer"])
    workflow_id = support_workflow_id(conversation_id)
    report = ReplayReport(conversation_id=conversation_id, workflow_id=workflow_id)
    handle = client.get_workflow_handle(workflow_id)
    try:
        described = await handle.describe()
    except Exception as err:  # noqa: BLE001 - not found, or another refusal of Temporal
        missing = "not found" in str(err).lower()
        report.reasons = ["no conversation has this id (a refund's id is not a conversation's)" if missing else
                          "no run of this conversation can be read: Temporal did not answer"]
        return report
    report.run_id, status, report.history_length = described.run_id, described.status, described.history_length
    report.run_status = status.name.lower() if status else None
    run = await read_run(await client.get_workflow_handle(workflow_id, run_id=described.run_id).fetch_history(),
                         client.data_converter)
    report.input_known, report.input_problem = run.input is not None, run.input_problem
    runs, reasons = [run], []
    for child in run.children:
        try:
            runs.append(await read_run(await client.get_workflow_handle(child).fetch_history(),
                                       client.data_converter, input_model=None))
        except Exception as err:  # noqa: BLE001
            reasons.append(f"the history of refund {child} cannot be read ({failure_kind(err)})")
    report.effects, report.harmless = classify(runs, systems)
    if status in FINISHED:
        reasons.append(f"the run {FINISHED[status]}: there is nothing to resume")
    if not report.input_known:
        reasons.append(f"the original input is not known: {run.input_problem or 'no start event'}")
    reasons += [f"{e.activity} {e.key or ''} ({e.system}): {e.status}: {e.reason}" for e in report.effects
                if e.status not in SAFE]
    if not run.reset_points:
        reasons.append("no workflow task completed: there is no point to reset to")
    if run.replaying_reset:  # its writes are not scheduled again yet: they would look absent
        reasons.append("this run was just reset and has not replayed to a completed workflow task yet: "
                       "check again in a moment")
    report.reset_event_id = run.reset_points[-1] if run.reset_points else None
    report.verdict = "refuse" if reasons else "resume"
    report.reasons = reasons or [
        f"every write is deduplicated or resolved ({len(report.effects)}); the rest only reads: reset to "
        f"workflow task event {report.reset_event_id}"]
    return report
