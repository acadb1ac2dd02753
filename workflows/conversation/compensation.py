"""Reversible writes: their before-image, read just before they run, and their
compensation, run when a cancel asks for a full rollback.

A reversible write's spec names its compensation tool and the field of the subject's
document (``compensation_from``) that restores it: an address change is undone by
setting the address read right before it. The compensation is a write like any other:
an activity with an idempotency key from business identity
(``keys.compensation_operation``), so a retried or replayed rollback undoes once.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any, Callable, Optional

from temporalio import workflow
from temporalio.exceptions import ActivityError

from workflows.domain import keys
from workflows.domain import transitions as tr
from workflows.domain.actions import call_arguments, make_tool_call, read_of
from workflows.activity_api import ToolActivitiesApi
from workflows.domain.catalogue import ToolClass, spec_of
from workflows.domain.contracts import CancelRequest, ReadToolRequest, WriteToolRequest
from workflows.interrupts import cancellable
from workflows.ledger_lookup import recorded_under
from workflows.options import HEARTBEAT_TIMEOUT, READ_RETRY, READ_TIMEOUT, WRITE_RETRY
from workflows.domain.state import CompletedOperation, ConversationState

async def _subject_document(state: ConversationState, spec: Any, subject_id: str,
                            cancel_requested: Callable[[], Optional[CancelRequest]]) -> Optional[dict[str, Any]]:
    """The subject's document as the system of record holds it now; None when it cannot be read."""
    read_call = read_of(spec.subject, subject_id)
    handle = workflow.start_activity_method(
        ToolActivitiesApi.run_read_tool,
        ReadToolRequest(store=state.store, call=read_call, system_of_record=state.system_of_record,
                        scope_user_id=state.customer.user_id if state.customer else None),
        heartbeat_timeout=HEARTBEAT_TIMEOUT, start_to_close_timeout=READ_TIMEOUT, retry_policy=READ_RETRY,
        summary=f"read {spec.subject.removesuffix('_id')} for {spec.name}",
    )
    try:
        result = await cancellable(handle, cancel_requested)
    except ActivityError:
        return None
    return json.loads(result.result) if result.ok else None


async def before_image(state: ConversationState, call: Any,
                       cancel_requested: Callable[[], Optional[CancelRequest]]
                       ) -> tuple[Optional[dict[str, Any]], Optional[dict[str, Any]]]:
    """The compensation arguments of reversible write ``call``, read from the system of
    record right before it runs; None for other writes or when the read fails (the write
    still runs; a later rollback reports that it could not be undone). Raises
    ``Interrupted`` when a cancel arrives during the read (the write then never starts).
    Returns (those arguments, the subject's document as read, for read-before-write)."""
    spec = spec_of(call.name)
    if spec.tool_class is not ToolClass.REVERSIBLE_WRITE or spec.subject is None:
        return None, None
    subject_id = call_arguments(call)[spec.subject]
    document = await _subject_document(state, spec, subject_id, cancel_requested)
    value = document.get(spec.compensation_from or "") if document else None
    return ({spec.subject: subject_id, **value} if isinstance(value, dict) else None), document


def usable_before_image(call: Any, undo: Optional[dict[str, Any]], replayed: bool) -> Optional[dict[str, Any]]:
    """The compensation arguments to keep for reversible write ``call`` once its result is
    in: ``undo`` as read by ``before_image``, or None when it cannot be trusted.

    When the system of record replayed a recorded result (``replayed``), the write had
    applied before this attempt: after a reset re-executed the turn, the before-image was
    read from the write's own result, and undoing with it would restore nothing while the
    user is told the change was undone. Such an image holds exactly what the write set,
    so it is dropped (a rollback then reports the write as not undone, and a human follows
    up); an image that differs was read before the write applied and is kept."""
    if undo is None or not replayed:
        return undo
    args = call_arguments(call)
    return None if all(args.get(name) == value for name, value in undo.items()) else undo


async def roll_back(state: ConversationState, write_timeout_seconds: float) -> list[str]:
    """Undo every reversible write this conversation applied, newest first, if what it set
    is still there (a later change by someone else is never overwritten). Returns one line
    per write that could not be undone (for the user's summary); each undone write's step
    becomes ``compensated``."""
    trouble = []
    for op in reversed(state.completed_operations):
        spec = spec_of(op.tool)
        if not op.ok or op.compensated or spec.tool_class is not ToolClass.REVERSIBLE_WRITE:
            continue
        if op.undo_arguments is None or spec.compensation is None:
            trouble.append(_step_detail(state, op))
            continue
        if await _compensate(state, op, spec.compensation, write_timeout_seconds):
            tr.compensated(state, op)
        else:
            trouble.append(_step_detail(state, op))
    return trouble


async def _compensate(state: ConversationState, op: CompletedOperation, tool: str,
                      write_timeout_seconds: float) -> bool:
    spec = spec_of(op.tool)
    call = make_tool_call(tool, op.undo_arguments or {})
    key = keys.idempotency_key(call, keys.compensation_operation(op.operation_id))
    request = WriteToolRequest(store=state.store, call=call, idempotency_key=key,
                               system_of_record=state.system_of_record)
    # Undo only what this write set: if something else changed it since (another
    # conversation, an agent), restoring the before-image would overwrite that change.
    now = await _subject_document(state, spec, op.arguments[spec.subject], lambda: None)
    current = now.get(spec.compensation_from or "") if now else None
    if not isinstance(current, dict) or any(current.get(k) != v for k, v in op.arguments.items() if k in current):
        # not what the write set: someone else changed it, or a reset re-ran a rollback whose undo
        # applied; the ledger, asked by the undo's key, says whether the undo was ours
        result = await recorded_under(request, "ask the ledger whether the undo already applied")
        if result is None:
            return False
    else:
        result = await _undo(request, write_timeout_seconds, f"undo {op.tool} (rollback)")
        if result is None:
            return False
    if result.ok:
        tr.apply_compensation_result(state, call, result.result)
    return result.ok


async def _undo(request: WriteToolRequest, write_timeout_seconds: float, summary: str) -> Optional[Any]:
    """The compensating write's result; None when it failed and the ledger holds nothing under its key."""
    try:
        return await workflow.execute_activity_method(
            ToolActivitiesApi.run_write_tool, request,
            heartbeat_timeout=HEARTBEAT_TIMEOUT, start_to_close_timeout=timedelta(seconds=write_timeout_seconds),
            retry_policy=WRITE_RETRY, summary=summary,
        )
    except ActivityError:
        # its retries ran out, but it may have committed with its answer lost: the ledger, asked by
        # its key, says; None: reported not undone, a human follows up
        return await recorded_under(request, "re-check the undo by its key")


def _step_detail(state: ConversationState, op: CompletedOperation) -> str:
    return next((step.detail for step in state.steps if step.operation_id == op.operation_id), op.tool)
