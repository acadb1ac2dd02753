"""Standalone refunds: a backend service's ``RefundRequest``, run by ``RefundWorkflow``
without a conversation, under the same policy checks and the same ledger.

A request names its business identity (store, order, the caller's ``request_id``), so
its workflow id (``keys.standalone_refund_id``) and its idempotency key
(``keys.standalone_operation_id``) are the same however often it is sent. The caller is
not a customer who authenticated in a chat: the order's owner, from the fresh read, is
the customer, and ``standalone_refusal`` checks the tool spec's own policy (scope gates
and ``check``, ``workflows.domain.policy.validator.check_call``) against a state built from fresh reads of
the order, its owner and the products concerned — so, e.g., a refund to a payment
method that is not the customer's is refused exactly as in a conversation.

A request has no conversation to escalate it: when its write's outcome cannot be shown
(the retries ran out, or the payments system could not say), ``escalate_unknown`` does
what a conversation does — asks the ledger once more by the key, else opens a ticket keyed
by the write (``keys.escalation_ticket_key``) and ends ``escalated`` with the reason;
nothing is replayed. A deterministic refusal (invalid data, a key conflict) is ``refused``.

Pure models and workflow code (activities by reference): imported inside the sandbox.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal, Optional, get_args, get_origin

from annotated_types import MinLen
from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo
from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from workflows.domain import keys
from workflows.domain.actions import call_arguments, make_tool_call, read_of
from workflows.activity_api import ToolActivitiesApi
from workflows.domain.catalogue import STANDALONE_OPERATIONS, folds, spec_of
from workflows.domain.policy.approvals import public_detail
from workflows.domain.policy.clauses import PolicyViolation
from workflows.domain.contracts import ReadToolRequest, RefundInput, RefundOutcome, TicketRequest, ToolResult, WriteToolRequest
from workflows.domain.errors import ErrorType
from workflows.failures import ORDER_SYSTEM, application_cause, log_detail, public_reason
from workflows.domain.replies import unknown_store_reason
from workflows.domain.contracts import DEFAULT_WRITE_TIMEOUT_SECONDS
from workflows.options import HEARTBEAT_TIMEOUT, READ_RETRY, READ_TIMEOUT
from workflows.domain.policy.validator import check_call
from workflows.domain.records import Customer
from workflows.domain.state import ConversationState
from workflows.domain.user_text import refuse_controls
from workflows.visibility import call_summary

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_:@-]*$"
"""A request id: URL-safe and without ``.`` (see ``keys.standalone_operation_id``)."""
STORE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]*$"
ORDER_PATTERN = r"^#?[A-Za-z0-9]+$"
"""An order id as the retail system writes it (``#W0000000``): the refund id embeds it."""
OPERATION_TOOLS = tuple(STANDALONE_OPERATIONS.values())
"""The refund-type writes a request may name, in catalogue order."""


def _argument_type(name: str, field: FieldInfo) -> Any:
    """The request's type of argument ``name`` of a tool (``field``: its declaration in the
    tool's ``args``), optional: the tool's own bounds, no control characters in text
    (``refuse_controls``: an ``…_id`` or a list of ids refuses every control character) and no
    empty text, as every free-text and id field of the API."""
    annotation, bounds = field.annotation, list(field.metadata)
    if annotation is str:
        return Optional[Annotated[(str, *bounds, MinLen(1), refuse_controls(name, is_id=name.endswith("_id")))]]
    if get_origin(annotation) is list and get_args(annotation):
        item = get_args(annotation)[0]
        item_type, *item_bounds = get_args(item) if get_origin(item) is Annotated else (item,)
        if item_type is str:
            item = Annotated[(str, *item_bounds, MinLen(1), refuse_controls("an item id", is_id=True))]
        return Optional[Annotated[(list[item], *bounds)]]  # type: ignore[valid-type]
    return Optional[Annotated[(annotation, *bounds)]] if bounds else Optional[annotation]


def _argument_fields() -> dict[str, Any]:
    """Every argument of the refund-type writes but ``order_id`` (the request names the order
    itself), each once, optional, in catalogue order. Two tools naming the same argument share
    its first declaration here; each tool's own model validates the value again
    (``RefundRequest.tool_call``)."""
    fields: dict[str, Any] = {}
    for tool in OPERATION_TOOLS:
        for name, field in spec_of(tool).args.model_fields.items():
            if name != "order_id" and name not in fields:
                fields[name] = (_argument_type(name, field), None)
    return fields


ARGUMENT_FIELDS = tuple(_argument_fields())
"""The request's argument fields: the arguments its operations' tools take."""
DIGESTED_WHEN_ABSENT = frozenset({"reason", "item_ids", "new_item_ids", "payment_method_id"})
"""Argument fields a request's digest holds even when absent (as null); any other argument
field only when given, so a tool that adds an argument leaves the digest of every request
without it as it is (``RefundRequest.digest``: a stored digest is compared with a repeat's)."""


class RefundRequestFields(BaseModel):
    """The fields of ``RefundRequest`` every operation shares: the request's business
    identity and its operation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request_id: str = Field(min_length=1, max_length=96, pattern=ID_PATTERN)
    order_id: str = Field(min_length=2, max_length=32, pattern=ORDER_PATTERN)
    operation: Literal[tuple(STANDALONE_OPERATIONS)]  # type: ignore[valid-type]
    store: str = Field(default="main", min_length=1, max_length=64, pattern=STORE_PATTERN)

    @property
    def tool(self) -> str:
        """The τ-bench tool of ``operation``."""
        return STANDALONE_OPERATIONS[self.operation]

    def tool_call(self) -> Any:
        """The typed ``ToolCall``. Raises ``ValueError`` naming a missing argument or one
        the tool does not take (``pydantic.ValidationError`` is a ``ValueError``)."""
        given = {name: getattr(self, name) for name in ARGUMENT_FIELDS if getattr(self, name) is not None}
        return make_tool_call(self.tool, {**given, "order_id": self.order_id})

    def digest(self) -> str:
        """SHA-256 hex of the canonical JSON of the whole request (an absent argument field
        left out, but for ``DIGESTED_WHEN_ABSENT``): a repeated ``request_id`` with any other
        field different is a conflict, not a repeat."""
        dumped = {name: value for name, value in self.model_dump(mode="json").items()
                  if value is not None or name in DIGESTED_WHEN_ABSENT}
        return hashlib.sha256(json.dumps(dumped, sort_keys=True).encode()).hexdigest()

    def refund_id(self) -> str:
        """The workflow id of this request (``keys.standalone_refund_id``)."""
        return keys.standalone_refund_id(self.store, self.order_id, self.request_id)

    def refund_input(self, write_timeout_seconds: float = DEFAULT_WRITE_TIMEOUT_SECONDS) -> RefundInput:
        """The ``RefundInput`` for ``RefundWorkflow``: no conversation, no expected user
        (the order's owner is the customer), the operation id from the request id."""
        return RefundInput(store=self.store, operation_id=keys.standalone_operation_id(self.request_id, self.store),
                           call=self.tool_call(), expected_user_id=None, conversation_id=None,
                           write_timeout_seconds=write_timeout_seconds)


RefundRequest = create_model(
    "RefundRequest", __base__=RefundRequestFields, __module__=__name__,
    __doc__="""A backend's request for one refund-type write (body of ``POST /refunds``).

    ``operation`` picks the tool (``STANDALONE_OPERATIONS`` of the catalogue: each refund-type
    write's ``operation``); the other fields are that tool's arguments, as its ``args`` in the
    catalogue declare them (``ARGUMENT_FIELDS``: e.g. ``reason`` of a cancel, ``item_ids`` of a
    return, ``payment_method_id`` the refund destination of a return or the new method of a
    payment change). A field the tool does not take, or one it needs and misses, is refused
    when the request becomes its tool call; unknown fields are refused.""",
    **_argument_fields(),
)


def noun_of(tool: str) -> str:
    """How a sentence an API caller reads names the change ``tool`` makes (the spec's ``noun``:
    "cancellation"): tool names are internal (users never see internal ids)."""
    return spec_of(tool).noun or "change"


def is_standalone(inp: RefundInput) -> bool:
    """True for a backend's request (no conversation authenticated the customer)."""
    return inp.conversation_id is None


def order_state(inp: RefundInput, order_read: ToolResult) -> Optional[ConversationState]:
    """A state holding the order of a successful fresh read, whose customer is the order's owner
    (no personal details: ``standalone_refusal`` reads those); None when the read's document
    does not fold (what it is used for, an approval's detail, is then left out)."""
    try:
        order = json.loads(order_read.result)
        state = ConversationState(conversation_id=f"request {inp.operation_id}", store=inp.store)
        state.customer = Customer(user_id=order["user_id"], authenticated_via="backend request",
                                  authenticated_turn=0)
        folds.order(state, {"order_id": order["order_id"]}, order_read.result)
    except (KeyError, TypeError, ValueError):  # pydantic's ValidationError is a ValueError
        return None
    return state


async def standalone_refusal(inp: RefundInput,
                             order_read: ToolResult) -> tuple[Optional[str], Optional[ConversationState]]:
    """``(refusal, state)``: the policy refusal of a standalone request, or None when it may
    run; and the state it was checked against (None when a read failed).

    Reads the order's owner (and, for item changes, the products of the items concerned)
    from the system of record, folds them into a fresh ``ConversationState`` whose customer
    is the owner, and runs ``check_call`` (scope gates, status precondition, the spec's
    ``check``). The refusal is ``"<reason> (<clause>)"`` like the fresh-read precondition."""
    if not order_read.ok:
        return order_read.result.removeprefix("Error: "), None
    order = json.loads(order_read.result)
    user_id = order["user_id"]
    state = ConversationState(conversation_id=f"request {inp.operation_id}", store=inp.store)
    state.customer = Customer(user_id=user_id, authenticated_via="backend request", authenticated_turn=0)
    user = await _read(inp.store, read_of("user_id", user_id), user_id)
    if not user.ok:
        return user.result.removeprefix("Error: "), None
    folds.user(state, {"user_id": user_id}, user.result)
    folds.order(state, {"order_id": order["order_id"]}, order_read.result)
    wanted = set(getattr(inp.call.arguments, "item_ids", None) or [])
    if spec_of(inp.call.name).prices_new_items:
        for product_id in dict.fromkeys(i["product_id"] for i in order.get("items", []) if i["item_id"] in wanted):
            product = await _read(inp.store, read_of("product_id", product_id), user_id)
            if product.ok:
                folds.product(state, {"product_id": product_id}, product.result)
    try:
        check_call(state, inp.call)
    except PolicyViolation as violation:
        return f"{violation.reason} ({violation.rule.value})", state
    return None, state


def write_detail(call: Any, state: Optional[ConversationState]) -> Optional[str]:
    """The sentence a conversation would show a user to confirm ``call`` (the spec's ``detail``),
    from the facts of ``state``, as a supervisor reads it (``approvals.public_detail``: payment
    method ids as the customer sees them); None for a spec without one or facts it cannot use."""
    spec = spec_of(call.name)
    if spec.detail is None or state is None:
        return None
    arguments = call_arguments(call)
    try:
        return public_detail(spec.detail(state, arguments), detail_methods(state, arguments))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def detail_methods(state: ConversationState, arguments: dict[str, Any]) -> dict[str, str]:
    """Payment method id -> display ("" unknown) of the customer of ``state`` and of the
    ``payment_method_id`` in ``arguments``: the ids ``approvals.public_detail`` replaces."""
    methods = {method_id: method.display for method_id, method in
               (state.customer.payment_methods if state.customer else {}).items()}
    given = arguments.get("payment_method_id")
    if isinstance(given, str) and given:
        methods.setdefault(given, "")
    return methods


async def _read(store: str, call: Any, user_id: str) -> ToolResult:
    return await workflow.execute_activity_method(
        ToolActivitiesApi.run_read_tool, ReadToolRequest(store=store, call=call, scope_user_id=user_id),
        heartbeat_timeout=HEARTBEAT_TIMEOUT, start_to_close_timeout=READ_TIMEOUT, retry_policy=READ_RETRY,
        summary=call_summary(call, "standalone request:"),  # personal arguments left out
    )


NO_TICKET_SUFFIX = "; no ticket could be opened"
"""The end of an escalation's reason when its ticket could not be opened."""

KNOWN_NOT_APPLIED = (ErrorType.INVALID_DATA.value, ErrorType.IDEMPOTENCY_KEY_CONFLICT.value,
                     ErrorType.WRONG_SYSTEM_OF_RECORD.value)
"""Failures after which the write is known not to have been made: refused, not escalated."""


async def escalate_unknown(inp: RefundInput, write: WriteToolRequest, read: ToolResult,
                           err: ActivityError) -> RefundOutcome:
    """The outcome of a standalone write whose activity failed with ``err`` (retries run out,
    ``OutcomeUnknown``...): refused when the failure proves nothing was written; the
    ledger's result if it holds one under the key; else escalated, with a ticket opened
    for the order's owner (``read``: the fresh read) and the reason stated."""
    key = write.idempotency_key
    reason = public_reason(err, ORDER_SYSTEM)
    workflow.logger.warning("standalone %s failed: %s", inp.call.name, log_detail(err))
    cause = application_cause(err)
    if isinstance(cause, ApplicationError) and cause.type in KNOWN_NOT_APPLIED:
        return RefundOutcome(idempotency_key=key, result=f"Error: {reason}", ok=False, refused_reason=reason)
    options = dict(heartbeat_timeout=HEARTBEAT_TIMEOUT, start_to_close_timeout=READ_TIMEOUT, retry_policy=READ_RETRY)
    try:
        recorded = await workflow.execute_activity_method(
            ToolActivitiesApi.find_recorded_write, write, summary=f"re-check {inp.call.name} by its key", **options)
    except ActivityError as again:
        workflow.logger.warning("re-check before escalation failed: %s", log_detail(again))
        recorded = None
    if recorded is not None:
        return RefundOutcome(idempotency_key=key, result=recorded.result, ok=recorded.ok, replayed=True,
                             refused_reason=None if recorded.ok else recorded.result.removeprefix("Error: "))
    why = (f"the {noun_of(inp.call.name)} of order {inp.call.arguments.order_id} could not "
           f"be shown to have completed ({reason}); escalated to a human agent")
    owner = json.loads(read.result).get("user_id") if read.ok else None
    try:
        opened = await workflow.execute_activity_method(
            ToolActivitiesApi.open_ticket,
            TicketRequest(store=inp.store, ticket_key=keys.escalation_ticket_key(key), user_id=owner,
                          summary=f"{why} (request {inp.operation_id})"),
            summary="open a human-agent ticket", **options)
    except ActivityError as failed:
        workflow.logger.warning("escalation ticket failed: %s", log_detail(failed))
        opened = False
    stated = why if opened else f"{why}{NO_TICKET_SUFFIX}"
    return RefundOutcome(idempotency_key=key, result=f"Error: {stated}", ok=False, escalated=True,
                         escalation_reason=stated)


def unknown_store_refusal(inp: RefundInput, err: ActivityError) -> Optional[str]:
    """The refusal of a standalone request whose read failed because the system of record has
    no such store (``UnknownStore``: a request names its store, unchecked until then); None
    for any other failure, or a conversation's refund (its store was checked at its start)."""
    cause = application_cause(err)
    if not is_standalone(inp) or not isinstance(cause, ApplicationError) or \
            cause.type != ErrorType.UNKNOWN_STORE.value:
        return None
    return unknown_store_reason(inp.store)


KEY_CONFLICT_REASON = ("this request id was already used on this order with other arguments; nothing was "
                       "changed: use a new request_id for a different request")
"""The refusal of a request whose idempotency key the ledger holds for another call."""


def key_conflict_refusal(inp: RefundInput, err: ActivityError) -> Optional[str]:
    """The refusal of a standalone request whose ledger look-up found its key holding another
    call (``IdempotencyKeyConflict``): the same request id sent with other arguments after its
    first run left Temporal (retention, erasure), when the API's 409 can no longer see it. None
    for any other failure, or a conversation's refund."""
    cause = application_cause(err)
    if not is_standalone(inp) or not isinstance(cause, ApplicationError) or \
            cause.type != ErrorType.IDEMPOTENCY_KEY_CONFLICT.value:
        return None
    return KEY_CONFLICT_REASON
