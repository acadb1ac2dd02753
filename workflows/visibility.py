"""What operators see of a running conversation in the Temporal Web UI.

Search attributes for finding runs: ``CustomerId`` (the customer's keyed pseudonym),
``OrderIds`` (every order the conversation touched), ``Step``, ``ProcessStatus`` and
``PendingApproval``. The current details (the "User Metadata" tab) say what a run is
doing, as Markdown; activity summaries name each activity on the Timeline.

No personal data reaches any of them (house rule: "show ids"): arguments a
tool's spec marks as personal (emails, names, zips, addresses, payment method ids) are left
out, and so is the customer id, because τ-bench ids hold people's names
(``mia_garcia_4516``); operators see its pseudonym instead.

The pseudonym is keyed and the key is a secret that must not enter a workflow's input or
history. So the worker computes it: ``IdentityActivitiesApi.customer_pseudonym`` (a local
activity; ``activities.identity`` holds the key, given by ``worker.build_worker``) maps the
customer id the conversation authenticated to its pseudonym. ``publish`` is synchronous
(the workflow calls it for every event its transitions record), so it starts that lookup as a workflow task the first
time it sees a customer, and publishes again when the answer arrives. Until then
``CustomerId`` is unset and the details say the pseudonym is pending.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterable, Optional

from temporalio import workflow
from temporalio.exceptions import ActivityError

from workflows.domain import transitions as tr
from workflows.domain.actions import call_arguments
from workflows.activity_api import IdentityActivitiesApi
from workflows.domain.catalogue import spec_of
from workflows.domain.contracts import PseudonymRequest
from workflows.options import (
    CUSTOMER_ID,
    IDENTITY_RETRY,
    IDENTITY_TIMEOUT,
    LEGACY_STATUS,
    ORDER_IDS,
    PENDING_APPROVAL,
    STATUS,
    STEP,
)
from workflows.domain.state import ConversationState, Phase, StepStatus

SUMMARY_CHARS = 200
ORDER_IDS_KEPT = 50
"""At most this many order ids in ``OrderIds``: the first ones touched stay (an operator
searching an order finds the run that touched it first); later ones are not indexed. Order
ids are at most 100 characters, and 50 short τ-bench ids stay far below the server's
per-attribute size limit (2 KB by default)."""
ORDER_IDS_CHARS = 1500
"""Bound on the summed length of the ids in ``OrderIds`` (below the 2 KB size limit)."""
PROCESS_STATUS_PATCH = "process-status-attribute"
"""Runs of 1.0.0 publish their status as ``Status`` (``workflows.options.LEGACY_STATUS``) to the end;
new runs as ``ProcessStatus``."""
PERSONAL_ALWAYS = frozenset({"user_id"})
"""Argument names never shown: a τ-bench customer id holds the customer's name."""


def status_key() -> Any:
    """The search attribute a run publishes its status in: ``ProcessStatus``, or ``Status`` for a
    run of 1.0.0 (patch ``process-status-attribute``). Workflow code only."""
    return STATUS if workflow.patched(PROCESS_STATUS_PATCH) else LEGACY_STATUS


def safe_arguments(call: Any) -> dict[str, Any]:
    """The call's arguments without personal data (the spec's ``personal_data`` and ``user_id``)."""
    personal = spec_of(call.name).personal_data | PERSONAL_ALWAYS
    return {k: v for k, v in call_arguments(call).items() if k not in personal}


def call_summary(call: Any, prefix: str = "") -> str:
    """``[prefix ]tool arg arg...`` for the Timeline, without personal arguments."""
    values = [_text(v) for v in safe_arguments(call).values()]
    return " ".join([*([prefix] if prefix else []), call.name, *values])[:SUMMARY_CHARS]


def describe_call(call: Any) -> str:
    """``tool — order_id: #W1, reason: ...`` in Markdown, without personal arguments."""
    shown = ", ".join(f"{k}: {_text(v)}" for k, v in safe_arguments(call).items())
    return f"`{call.name}`" + (f" — {shown}" if shown else "")


def _text(value: Any) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def pending_approvals(state: Any) -> list[Any]:
    """The approvals awaiting a supervisor (``state.approvals`` when the state has them)."""
    return [a for a in getattr(state, "approvals", None) or [] if _value(getattr(a, "status", "")) == "pending"]


def business_step(state: ConversationState) -> str:
    """The business step: the phase when it awaits a supervisor or the user
    (``awaiting_approval``, ``awaiting_confirmation``), else the write being executed, or the
    status."""
    if state.phase in (Phase.AWAITING_APPROVAL, Phase.AWAITING_CONFIRMATION):
        return state.phase.value
    running = [step for step in state.steps if step.status == StepStatus.RUNNING]
    return running[-1].name if running else state.status.value


def touched_orders(state: ConversationState) -> list[str]:
    """Order ids the conversation read (found in the system of record), proposed a write
    on, or wrote, in that order; an id the system did not find never counts."""
    ids = list(state.orders)
    if state.pending_confirmation is not None:
        ids.append(state.pending_confirmation.call.arguments.model_dump().get("order_id"))
    ids += [op.arguments.get("order_id") for op in state.completed_operations]
    ids += [getattr(a, "order_id", None) for a in getattr(state, "approvals", None) or []]
    return [i for i in ids if isinstance(i, str) and i]


def accumulate(known: list[str], new: Iterable[str]) -> list[str]:
    """``known`` plus the ids of ``new`` not yet in it, within ``ORDER_IDS_KEPT`` and
    ``ORDER_IDS_CHARS``; never drops an id already kept."""
    kept = list(known)
    size = sum(map(len, kept))
    for order_id in new:
        if order_id in kept or len(kept) >= ORDER_IDS_KEPT or size + len(order_id) > ORDER_IDS_CHARS:
            continue
        kept.append(order_id)
        size += len(order_id)
    return kept


async def pseudonym_of(customer_id: str) -> Optional[str]:
    """The customer's keyed pseudonym, computed by the worker (a local activity); None if
    the worker could not compute it (then ``CustomerId`` stays unset, nothing else fails)."""
    try:
        return await workflow.execute_local_activity_method(
            IdentityActivitiesApi.customer_pseudonym, PseudonymRequest(customer_id=customer_id),
            start_to_close_timeout=IDENTITY_TIMEOUT, retry_policy=IDENTITY_RETRY,
            summary="pseudonym of the authenticated customer",
        )
    except ActivityError as err:
        workflow.logger.warning("customer pseudonym failed: %s", type(err.cause).__name__)
        return None


def _value(value: Any) -> Any:
    return getattr(value, "value", value)


def when(moment: Any) -> str:
    """A UTC time to the second, as operators read it."""
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC" if hasattr(moment, "strftime") else str(moment)


DOING = {tr.ModelAsked: "model proposing the next action"}
"""What the workflow is doing right after an event of these kinds, while the step it began
runs (the details' "Current step" says it)."""


def doing(event: tr.Event) -> Optional[str]:
    """What the workflow does right after ``event`` (``DOING``), or None."""
    return DOING.get(type(event))


class Visibility:
    """Publishes a conversation's state to the Web UI; upserts only changed search
    attributes (each upsert is a history event and a visibility write). ``OrderIds``
    starts from the attributes the run inherited (continue-as-new carries them over)."""

    def __init__(self) -> None:
        self._published: dict[str, Any] = {}
        self._order_ids: Optional[list[str]] = None
        self._pseudonyms: dict[str, Optional[str]] = {}
        self._last: Optional[tuple[ConversationState, Optional[str]]] = None
        self._lookups: set[asyncio.Task] = set()  # strong references: the loop keeps only weak ones
        self._status_key = status_key()
        """Asked when the run starts, before any activity: a patch is seen at the same point on replay."""

    def publish(self, state: ConversationState, activity: Optional[str] = None) -> None:
        """Refresh the current details and the search attributes. ``activity`` says what the
        workflow is doing right now (e.g. asking the model): details only, not a step."""
        self._last = (state, activity)
        if self._order_ids is None:
            inherited = workflow.info().typed_search_attributes
            self._published = {key.name: inherited.get(key) for key in (CUSTOMER_ID, ORDER_IDS, STEP, STATUS,
                                                                          LEGACY_STATUS, PENDING_APPROVAL)}
            self._order_ids = list(self._published[ORDER_IDS.name] or [])
        self._order_ids = accumulate(self._order_ids, touched_orders(state))
        customer = state.customer.user_id if state.customer else None
        if customer is not None and customer not in self._pseudonyms:
            self._pseudonyms[customer] = None
            lookup = asyncio.create_task(self._resolve(customer))
            self._lookups.add(lookup)
            lookup.add_done_callback(self._lookups.discard)
        pseudonym = self._pseudonyms.get(customer) if customer else None
        step = business_step(state)
        self._sync(state, step, pseudonym)
        workflow.set_current_details(self._details(state, step, activity, pseudonym))

    async def _resolve(self, customer_id: str) -> None:
        self._pseudonyms[customer_id] = await pseudonym_of(customer_id)
        if self._last is not None and self._pseudonyms[customer_id] is not None:
            self.publish(*self._last)

    def _sync(self, state: ConversationState, step: str, pseudonym: Optional[str]) -> None:
        pending = pending_approvals(state)
        wanted: dict[Any, Any] = {STEP: step, self._status_key: state.status.value}
        if pseudonym is not None:
            wanted[CUSTOMER_ID] = pseudonym
        if self._order_ids:
            wanted[ORDER_IDS] = list(self._order_ids)
        if pending:
            wanted[PENDING_APPROVAL] = pending[-1].approval_id
        updates = [key.value_set(value) for key, value in wanted.items() if self._published.get(key.name) != value]
        if not pending and self._published.get(PENDING_APPROVAL.name) is not None:
            updates.append(PENDING_APPROVAL.value_unset())
            self._published[PENDING_APPROVAL.name] = None
        if updates:
            workflow.upsert_search_attributes(updates)
            self._published.update({key.name: value for key, value in wanted.items()})

    def _details(self, state: ConversationState, step: str, activity: Optional[str],
                 pseudonym: Optional[str]) -> str:
        lines = [f"**Conversation** `{state.conversation_id}` — status **{state.status.value}**, turn {state.turn}",
                 f"**Current step:** {step}" + (f" ({activity})" if activity else "")]
        if state.customer:
            who = f"`{pseudonym}`" if pseudonym else "pseudonym pending"
            lines.append(f"**Customer:** {who} (authenticated by {state.customer.authenticated_via})")
        if self._order_ids:
            lines.append("**Orders:** " + ", ".join(f"`{order_id}`" for order_id in self._order_ids))
        if state.pending_confirmation:
            lines.append(f"**Awaiting confirmation:** {describe_call(state.pending_confirmation.call)}")
        for approval in pending_approvals(state):
            lines.append(f"**Approval pending:** `{approval.approval_id}` — `{approval.tool}` on "
                         f"`{approval.order_id}`, amount {approval.amount}, expires {when(approval.expires_at)}"
                         + "".join(f"\n- {reason}" for reason in getattr(approval, "reasons", [])))
        decided = [a for a in getattr(state, "approvals", None) or [] if getattr(a, "approver", None)]
        if decided:
            last = decided[-1]
            lines.append(f"**Last approval:** {_value(last.status)} by `{last.approver}` at {when(last.decided_at)} "
                         f"(`{last.tool}` on `{last.order_id}`)")
        if state.completed_operations:
            last_op = state.completed_operations[-1]
            target = last_op.arguments.get("order_id")
            # the key names the order, or the customer id (personal) for a customer-level write
            key = "" if "user_id" in last_op.arguments else f", key `{last_op.idempotency_key}`"
            lines.append(f"**Last write:** `{last_op.tool}`" + (f" on `{target}`" if target else "")
                         + (" — applied" if last_op.ok else " — refused") + key)
        if state.usage.model_calls:
            lines.append(usage_line(state.usage))
        if state.ended_reason and not state.is_open():
            lines.append(f"**Outcome:** {state.status.value}")
        return "\n\n".join(lines)


def usage_line(usage: Any) -> str:
    """The details' line of a ``Usage``: calls, tokens in all (of the budget, if any), and
    their kinds (uncached input, cache read, cache write, output) and the model."""
    budget = f" of a {usage.budget_tokens:,}-token budget" if usage.budget_tokens else ""
    return (f"**Model usage:** {usage.model_calls} calls, {usage.total_tokens():,} tokens{budget} (input "
            f"{usage.input_tokens:,}, cache read {usage.cache_read_input_tokens:,}, cache write "
            f"{usage.cache_creation_input_tokens:,}, output {usage.output_tokens:,}; model `{usage.model}`)")
