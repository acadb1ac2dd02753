"""Every value that enters the state, an activity's input or output, the state query's answer
or the message update's result has a bound you can name.

The guard walks the conversation state's models, every tool's argument model and the activity
and child-workflow contracts: each string, list or dict field must carry a pydantic
``max_length`` or have an entry in ``BOUNDS`` naming its bound and where it is enforced. A new
field without either fails here. The record fields (what a system of record answers) carry the
same figures the read activity cuts to (``activities.record_limits``).
"""

from __future__ import annotations

import inspect
import types
from typing import Annotated, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel

from activities import record_limits
from workflows.domain import contracts
from workflows.domain.catalogue import CATALOGUE
from workflows.domain.records import (
    CompletedOperation,
    Customer,
    OrderFact,
    OrderItem,
    PaymentEntry,
    ProductFact,
    Variant,
)
from workflows.domain.journal import RefundEventsRecord
from workflows.domain.state import ConversationState
from workflows.webhooks import workflow as webhooks

_ID = "an id the workflow makes from bounded parts"
_CONV = "≤128 characters: a conversation id (starter.client and the API refuse longer, docs/security.md)"
_STORE = "≤64 characters: the store (opening.StartRequest, refund.standalone)"
_SOR = "a 64-hex fingerprint of the database (starter.runtime.system_of_record.fingerprint)"
_TOOL = "a catalogue tool name (workflows.domain.catalogue: ≤40 characters)"
_ARGS = "the tool's argument model: every field bounded (this guard walks them)"
_RESULT = ("≤32 KB: a tool result cut by activities.record_limits inside the tool activity "
           "(strings 200, free text 2000, 100 items/keys, depth 8)")
_OP = "<conversation id>.t<turn> (keys.operation_id: ≤128 + 12 characters)"
_KEY = "{tool}:{order or user id ≤100}:{operation id} (keys.idempotency_key)"
_DETAIL = ("composed by catalogue.details from bounded arguments (≤50 item ids) and record fields "
           "(≤200 characters, options ≤100 keys)")
_APPROVAL = "workflows.domain.policy.approvals (open_approval / apply_decision)"

BOUNDS: dict[str, str] = {
    # the state
    "ConversationState.conversation_id": _CONV,
    "ConversationState.store": _STORE,
    "ConversationState.system_of_record": _SOR,
    "ConversationState.ended_reason": "a reason the workflow writes: replies and transitions.close (≤1000: cancel reasons)",
    "ConversationState.orders": "ORDERS_KEPT = 100 (catalogue.folds.order keeps the newest)",
    "ConversationState.products": "PRODUCTS_KEPT = 50 (catalogue.folds.product keeps the newest)",
    "ConversationState.steps": "STEPS_KEPT = 100 finished steps (transitions.start_step)",
    "ConversationState.pinned_facts": "MAX_PINNED_FACTS = 300 (facts.merge_facts)",
    "ConversationState.recent_turns": "RECENT_TURNS_KEPT = 12 (transitions.add_turn)",
    "ConversationState.observations": "OBSERVATIONS_KEPT = 12 (transitions.apply_read_result)",
    "ConversationState.awaiting_approval": "one per confirmed write awaiting a supervisor; each user turn proposes at most one",
    "ConversationState.approvals": "one per confirmed refund-type write that needed a supervisor (≤ one per turn)",
    "ConversationState.completed_operations": "OPERATIONS_KEPT = 200 (transitions.apply_write_result)",
    "ConversationState.rejections": "REJECTIONS_KEPT = 50 (transitions.reject)",
    "ConversationState.resolutions": "one per escalated step (conversation.resolution refuses a second)",
    "Turn.text": ("user: MAX_USER_MESSAGE_BYTES = 8192 (user_text, at every edge); assistant: ReplyAction/EndAction "
                  "≤8000 or a reply of workflows.domain.replies quoting a bounded detail"),
    "PinnedFact.kind": "one of the kinds in facts._PATTERNS",
    "PinnedFact.value": "a bounded pattern of facts._PATTERNS (≤280 characters)",
    "PinnedFact.verbatim": "a bounded pattern of facts._PATTERNS (≤280 characters)",
    "Step.step_id": _OP,
    "Step.name": _TOOL,
    "Step.operation_id": _OP,
    "Step.detail": _DETAIL,
    "Step.error": "a refusal: a write's result (free text ≤2000, record_limits) or a reason ≤1000",
    "PendingConfirmation.operation_id": _OP,
    "PendingConfirmation.detail": _DETAIL,
    "PendingConfirmation.digest": "64 hex (actions.call_digest)",
    "CompletedOperation.operation_id": _OP,
    "CompletedOperation.idempotency_key": _KEY,
    "CompletedOperation.tool": _TOOL,
    "CompletedOperation.arguments": _ARGS,
    "CompletedOperation.result": _RESULT,
    "CompletedOperation.child_workflow_id": "refund-{store}-{order}-{operation id} (keys)",
    "CompletedOperation.undo_arguments": "the compensation's argument model (bounded; built from a cut read)",
    "Observation.tool": _TOOL,
    "Observation.arguments": _ARGS,
    "Observation.result": _RESULT,
    "Rejection.rule": "a Rule value (policy.clauses)",
    "Rejection.reason": "MAX_REJECTION_REASON_CHARS = 1000 (transitions.reject)",
    "Rejection.proposal": "MAX_REJECTED_PROPOSAL_CHARS = 4000 of its JSON (transitions.reject)",
    "OutcomeResolution.step_id": _OP,
    "OutcomeResolution.operation_id": _OP,
    "OutcomeResolution.outcome": "applied or not_applied (conversation.resolution)",
    "OutcomeResolution.operator": "≤128 (conversation.resolution.ResolutionRequest)",
    "OutcomeResolution.actor": "key:<id>, local or cli (starter.api.auth)",
    "OutcomeResolution.note": "≤1000 (conversation.resolution.ResolutionRequest)",
    "OutcomeResolution.told": "a sentence of workflows.domain.replies",
    "Usage.model": "the configured model name or the provider's echo of it (activities.llm)",
    "Approval.approval_id": "MAX_APPROVAL_ID = 1100 (" + _APPROVAL + ")",
    "Approval.workflow_id": "support-<conversation id> (≤1000 bytes: Temporal)",
    "Approval.operation_id": _OP,
    "Approval.digest": "64 hex (actions.call_digest)",
    "Approval.tool": _TOOL,
    "Approval.order_id": "≤100 (orders.ORDER_ID)",
    "Approval.reasons": "one per approval rule, ≤4 (" + _APPROVAL + ")",
    "Approval.approver": "≤128 (ApprovalDecision)",
    "Approval.note": "≤1000 (ApprovalDecision)",
    # activity and child-workflow contracts
    "ToolResult.result": _RESULT,
    "ToolResult.system_of_record": _SOR,
    "ReadToolRequest.store": _STORE,
    "ReadToolRequest.scope_user_id": "a customer id read from the record (≤200, record_limits)",
    "ReadToolRequest.system_of_record": _SOR,
    "WriteToolRequest.store": _STORE,
    "WriteToolRequest.idempotency_key": _KEY,
    "WriteToolRequest.system_of_record": _SOR,
    "EmailRequest.store": _STORE,
    "EmailRequest.message_key": "email:{write key} (keys)",
    "EmailRequest.to_email": "≤200 (a record field, record_limits) or ≤320 (the lookup's argument)",
    "EmailRequest.subject": "a subject of catalogue.notices naming one order",
    "EmailRequest.body": "Notice.body of the write's answer (≤32 KB, record_limits)",
    "TicketLookup.store": _STORE,
    "TicketLookup.ticket_key": "transfer:/escalate:/approval-expired: keys (keys)",
    "TicketRequest.store": _STORE,
    "TicketRequest.ticket_key": "transfer:/escalate:/approval-expired: keys (keys)",
    "TicketRequest.user_id": "a customer id read from the record (≤200, record_limits)",
    "TicketRequest.summary": "TransferAction.summary ≤4000, or a reason with withdrawn details (execute.escalation_summary)",
    "ModelRequest.conversation_id": _CONV,
    "ModelRequest.prompt_version": "a key of prompt.PROMPT_VERSIONS",
    "ModelRequest.view": "prompt.state_view: the state's windows (PROMPT_TURNS, PROMPT_OBSERVATIONS, ...) of bounded records",
    "ModelSnapshot.system": "prompt.render_system: constant per prompt version",
    "ModelSnapshot.stable": "two blocks of prompt.render_cached (records, pinned facts: bounded as the state)",
    "ModelSnapshot.log": "prompt.render_lean: the facts block and one line per message of the windowed state view",
    "ModelSnapshot.content": "prompt.render_cached's volatile block of the windowed state view",
    "ModelResult.model": "the configured model name or the provider's echo of it (activities.llm)",
    "RefundInput.store": _STORE,
    "RefundInput.operation_id": _OP,
    "RefundInput.expected_user_id": "a customer id read from the record (≤200, record_limits)",
    "RefundInput.notify_email": "≤200 (a record field, record_limits) or ≤320 (the lookup's argument)",
    "RefundInput.conversation_id": _CONV,
    "RefundInput.approved_by": "≤128 (ApprovalDecision.approver)",
    "RefundInput.system_of_record": _SOR,
    "RefundInput.confirmed_fingerprint": "64 hex (policy.read_before_write.fingerprint)",
    "RefundInput.confirmed_method_id": "≤100 (orders.PAYMENT_METHOD_ID)",
    "RefundOutcome.idempotency_key": _KEY,
    "RefundOutcome.result": _RESULT,
    "RefundOutcome.refused_reason": "a policy reason (≤1000) or a write's refusal (free text ≤2000, record_limits)",
    "RefundOutcome.escalation_reason": "a sentence of workflows.domain.replies",
    "SupportInput.conversation_id": _CONV,
    "SupportInput.store": _STORE,
    "SupportInput.state": "a ConversationState dump: bounded as this guard checks",
    "SupportInput.answered": "ANSWERED_KEPT = 50 replies by message id (conversation.answered)",
    "AssistantReply.text": "Turn.text's bound (an assistant turn)",
    "AssistantReply.status": "a ConversationStatus value",
    "AssistantReply.awaiting_confirmation": _DETAIL,
    "AssistantReply.awaiting_approval": "MAX_APPROVAL_ID = 1100 (" + _APPROVAL + ")",
    "AssistantReply.message_digest": "16 hex (contracts.message_digest)",
    "TurnRecord.conversation_id": _CONV,
    "TurnRecord.customer_id": "a customer id read from the record (≤200, record_limits)",
    "TurnRecord.tenant": "≤64 characters: a Tenant search attribute (settings.types.TENANT_PATTERN, set by the client)",
    "TurnRecord.verdicts": "one per model call and read of a turn (MAX_STATE_DRIVEN_READS_PER_TURN, MAX_BATCH_CALLS)",
    "TurnRecord.transcript": "the turn's messages: the user's and the replies said in it",
    "TurnRecord.events": "one per fact of the turn, beside its verdicts and transcript entries (bounded as they are)",
    "RefundEventsRecord.refund_id": "a refund's workflow id: keys.refund_workflow_id / standalone_refund_id of bounded parts",
    "RefundEventsRecord.conversation_id": _CONV,
    "RefundEventsRecord.customer_id": "a customer id read from the record (≤200, record_limits)",
    "RefundEventsRecord.events": "at most one per event type of a refund, and one ticket (workflows.refund.events)",
    "EventRecord.key": "an operation or approval id (MAX_APPROVAL_ID) with a prefix and a type: ≤1100 (events table)",
    "EventRecord.data": "ids, statuses and amounts of the state's own records (conversation.journal.JournalLog._event)",
    "VerdictRecord.rule": "a Rule value (policy.clauses)",
    "VerdictRecord.reason": "a rejection's reason (≤1000, transitions.reject)",
    "VerdictRecord.outcome": "an Outcome value",
    "TranscriptRecord.text": "Turn.text's bound",
    "TranscriptRecord.message_id": "≤1000 bytes: a Temporal update id (starter.client refuses longer)",
}
"""Each field without a pydantic ``max_length``: its bound and where that bound is enforced."""

ROOTS: list[type[BaseModel]] = [
    ConversationState,
    *(spec.args for spec in CATALOGUE.values()),
    contracts.ToolResult, contracts.ReadToolRequest, contracts.WriteToolRequest, contracts.EmailRequest,
    contracts.TicketLookup, contracts.TicketRequest, contracts.ModelRequest, contracts.ModelResult,
    contracts.RefundInput, contracts.RefundOutcome, contracts.SupportInput, contracts.AssistantReply,
    webhooks.DeliveryInput, webhooks.DeliveryAttempt, webhooks.SweepInput, webhooks.SweepRequest,
    RefundEventsRecord,
]
"""The state (the state query's answer and continue-as-new's input), every tool's arguments, and
the inputs and outputs of the activities, the refund child, the message update and the webhook
delivery workflows."""


def _shape(annotation: object) -> tuple[set[str], set[type[BaseModel]]]:
    """The unbounded-able kinds (``str``, ``list``, ``dict``) of a field's type at its top level,
    and the models nested anywhere in it."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _shape(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        kinds: set[str] = set()
        models: set[type[BaseModel]] = set()
        for arg in get_args(annotation):
            k, m = _shape(arg)
            kinds |= k
            models |= m
        return kinds, models
    if annotation is str:
        return {"str"}, set()
    if origin in (list, tuple, set, frozenset, dict) or annotation in (list, dict):
        models = set()
        for arg in get_args(annotation):
            models |= _shape(arg)[1]
        return {"dict" if origin is dict or annotation is dict else "list"}, models
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return set(), {annotation}
    return set(), set()


def _unbounded_fields() -> dict[str, str]:
    """``Model.field`` → its kinds, for every str/list/dict field without ``max_length``
    reachable from ``ROOTS``."""
    seen: set[type[BaseModel]] = set()
    todo, found = list(ROOTS), {}
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, info in model.model_fields.items():
            kinds, models = _shape(info.annotation)
            todo.extend(models)
            if kinds and not any(isinstance(m, annotated_types.MaxLen) for m in info.metadata):
                found[f"{model.__name__}.{name}"] = "/".join(sorted(kinds))
    return found


def test_every_field_has_a_bound_you_can_name():
    missing = sorted(set(_unbounded_fields()) - set(BOUNDS))
    assert not missing, ("fields without a bound: give each a pydantic max_length, or an entry in BOUNDS "
                         f"naming its bound and where it is enforced: {missing}")


def test_the_table_names_only_fields_that_need_it():
    stale = sorted(set(BOUNDS) - set(_unbounded_fields()))
    assert not stale, f"BOUNDS entries for fields that no longer exist or now have a max_length: {stale}"
    assert all(len(bound) >= 10 for bound in BOUNDS.values())


def test_tool_arguments_are_bounded_by_their_models_alone():
    for spec in CATALOGUE.values():
        for name, info in spec.args.model_fields.items():
            if _shape(info.annotation)[0]:
                assert any(isinstance(m, annotated_types.MaxLen) for m in info.metadata), f"{spec.name}.{name}"


def _max_length(model: type[BaseModel], name: str) -> int:
    return next(m.max_length for m in model.model_fields[name].metadata if isinstance(m, annotated_types.MaxLen))


def test_record_fields_carry_the_figures_the_read_activity_cuts_to():
    text = record_limits.MAX_TEXT_CHARS
    for model, names in ((OrderItem, ("item_id", "product_id", "name")), (OrderFact, ("order_id", "user_id", "status")),
                         (PaymentEntry, ("transaction_type", "payment_method_id")), (ProductFact, ("product_id", "name")),
                         (Variant, ("item_id",)), (Customer, ("user_id", "first_name", "last_name", "zip"))):
        for name in names:
            assert _max_length(model, name) == text == 200, f"{model.__name__}.{name}"
    assert _max_length(OrderFact, "items") == record_limits.MAX_LIST_ITEMS == 100
    assert _max_length(OrderItem, "options") == _max_length(Variant, "options") == record_limits.MAX_OBJECT_KEYS == 100
    assert _max_length(ProductFact, "variants") == 100 and _max_length(Customer, "order_ids") == 100
    assert record_limits.MAX_DEPTH == 8 and record_limits.MAX_FREE_TEXT_CHARS == 2000
    assert record_limits.MAX_RESULT_BYTES == 32 * 1024


def test_bounds_cut_what_a_saved_state_already_holds_instead_of_refusing_it():
    item = {"item_id": "1" * 300, "product_id": "p", "name": "n" * 5000, "price": "1.00",
            "options": {f"k{i}": i for i in range(150)}}
    loaded = OrderItem.model_validate(item)
    assert len(loaded.item_id) == 200 and len(loaded.name) == 200 and len(loaded.options) == 100
    order = OrderFact.model_validate({"order_id": "#W1", "user_id": "u", "status": "pending",
                                      "items": [item] * 150})
    assert len(order.items) == 100
    assert "cut" not in order.model_dump(mode="json")  # an order read whole dumps as it always did
    assert CompletedOperation.model_fields["result"].metadata == []  # bounded where it is made (BOUNDS)
