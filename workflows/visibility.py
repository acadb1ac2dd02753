"""What operators see of a running conversation in the Temporal Web UI.

Search attributes (``CustomerId``, ``OrderId``, ``Step``) for finding runs, the
current details (the "User Metadata" tab) for what a run is doing, and the activity
summaries on the Timeline. Summaries never carry personal data: arguments a tool's
spec marks as personal are left out.
"""

from __future__ import annotations

from typing import Any, Optional

from temporalio import workflow

from workflows.actions import call_arguments
from workflows.catalogue import spec_of
from workflows.options import CUSTOMER_ID, ORDER_ID, STEP
from workflows.state import ConversationState, StepStatus

SUMMARY_CHARS = 200


def call_summary(call: Any, prefix: str = "") -> str:
    """``[prefix ]tool arg arg...`` for the Timeline, without personal arguments."""
    personal = spec_of(call.name).personal_data
    values = [str(v) for k, v in call_arguments(call).items() if k not in personal]
    return " ".join([*([prefix] if prefix else []), call.name, *values])[:SUMMARY_CHARS]


def business_step(state: ConversationState) -> str:
    """The business step: ``awaiting_confirmation``, the write being executed, or the status."""
    if state.pending_confirmation is not None:
        return "awaiting_confirmation"
    running = [step for step in state.steps if step.status == StepStatus.RUNNING]
    return running[-1].name if running else state.status.value


class Visibility:
    """Publishes a conversation's state to the Web UI; upserts only changed search
    attributes (each upsert is a history event and a visibility write)."""

    def __init__(self) -> None:
        self._published: dict[str, str] = {}

    def publish(self, state: ConversationState, activity: Optional[str] = None) -> None:
        """Refresh the current details and the search attributes. ``activity`` says what the
        workflow is doing right now (e.g. asking the model): details only, not a step."""
        step = business_step(state)
        self._sync(state, step)
        lines = [f"**Conversation** `{state.conversation_id}` — {state.status.value}, turn {state.turn}",
                 f"**Current step:** {step}" + (f" ({activity})" if activity else "")]
        if state.customer:
            lines.append(f"**Customer:** {state.customer.user_id}")
        if state.pending_confirmation:
            lines.append(f"**Awaiting confirmation:** {state.pending_confirmation.detail}")
        if state.completed_operations:
            last = state.completed_operations[-1]
            lines.append(f"**Last write:** {last.tool} `{last.idempotency_key}` ok={last.ok}")
        workflow.set_current_details("\n\n".join(lines))

    def _sync(self, state: ConversationState, step: str) -> None:
        wanted = {STEP: step}
        if state.customer is not None:
            wanted[CUSTOMER_ID] = state.customer.user_id
        if state.orders:
            wanted[ORDER_ID] = max(state.orders.values(), key=lambda order: order.read_turn).order_id
        changed = [key.value_set(value) for key, value in wanted.items() if self._published.get(key.name) != value]
        if changed:
            workflow.upsert_search_attributes(changed)
            self._published.update({key.name: value for key, value in wanted.items()})
