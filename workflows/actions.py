"""Typed proposals the model may make, and the tool catalogue they refer to.

The model never acts: it returns one ``ProposedAction`` (a discriminated union on
``kind``) and the workflow decides. Tool arguments are strict pydantic models
(``extra="forbid"``) so a proposal carrying an invented field, such as an amount,
is a schema error and never reaches a tool.

Pure and deterministic: imported inside the Temporal workflow sandbox.
"""

from __future__ import annotations

import hashlib
import json
from enum import Enum
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

ORDER_ID_PATTERN = r"^#W\d{7}$"
ITEM_ID_PATTERN = r"^\d{10}$"
PAYMENT_METHOD_PATTERN = r"^(credit_card|gift_card|paypal)_\d+$"


class ToolClass(str, Enum):
    """How a tool touches the system of record. Reads run at once with free retries;
    writes need confirmation and an idempotency key; reversible writes run as activities
    of the conversation, irreversible ones (they move money) as their own ``RefundWorkflow``."""

    READ = "read"
    REVERSIBLE_WRITE = "reversible_write"
    IRREVERSIBLE_WRITE = "irreversible_write"


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FindUserIdByEmailArgs(_Args):
    email: str = Field(min_length=3, max_length=320)


class FindUserIdByNameZipArgs(_Args):
    first_name: str = Field(min_length=1, max_length=100)
    last_name: str = Field(min_length=1, max_length=100)
    zip: str = Field(min_length=1, max_length=20)


class GetUserDetailsArgs(_Args):
    user_id: str = Field(min_length=1, max_length=100)


class GetOrderDetailsArgs(_Args):
    order_id: str = Field(pattern=ORDER_ID_PATTERN)


class GetProductDetailsArgs(_Args):
    product_id: str = Field(pattern=ITEM_ID_PATTERN)


class ListAllProductTypesArgs(_Args):
    pass


class CalculateArgs(_Args):
    expression: str = Field(min_length=1, max_length=500)


class ThinkArgs(_Args):
    thought: str = Field(max_length=4000)


CANCEL_REASONS = ("no longer needed", "ordered by mistake")
"""The only cancellation reasons (policy clause cancel-pending-only; the benchmark tool checks them too)."""


class CancelPendingOrderArgs(_Args):
    order_id: str = Field(pattern=ORDER_ID_PATTERN)
    reason: str = Field(max_length=200)  # the enum is a policy rule, checked with its reason


class _AddressFields(_Args):
    address1: str = Field(min_length=1, max_length=200)
    address2: str = Field(max_length=200)
    city: str = Field(min_length=1, max_length=100)
    state: str = Field(min_length=1, max_length=100)
    country: str = Field(min_length=1, max_length=100)
    zip: str = Field(min_length=1, max_length=20)


class ModifyPendingOrderAddressArgs(_AddressFields):
    order_id: str = Field(pattern=ORDER_ID_PATTERN)


class ModifyUserAddressArgs(_AddressFields):
    user_id: str = Field(min_length=1, max_length=100)


class _ItemChangeArgs(_Args):
    order_id: str = Field(pattern=ORDER_ID_PATTERN)
    item_ids: list[Annotated[str, Field(pattern=ITEM_ID_PATTERN)]] = Field(min_length=1, max_length=50)
    new_item_ids: list[Annotated[str, Field(pattern=ITEM_ID_PATTERN)]] = Field(min_length=1, max_length=50)
    payment_method_id: str = Field(pattern=PAYMENT_METHOD_PATTERN)


class ModifyPendingOrderItemsArgs(_ItemChangeArgs):
    pass


class ExchangeDeliveredOrderItemsArgs(_ItemChangeArgs):
    pass


class ModifyPendingOrderPaymentArgs(_Args):
    order_id: str = Field(pattern=ORDER_ID_PATTERN)
    payment_method_id: str = Field(pattern=PAYMENT_METHOD_PATTERN)


class ReturnDeliveredOrderItemsArgs(_Args):
    order_id: str = Field(pattern=ORDER_ID_PATTERN)
    item_ids: list[Annotated[str, Field(pattern=ITEM_ID_PATTERN)]] = Field(min_length=1, max_length=50)
    payment_method_id: str = Field(pattern=PAYMENT_METHOD_PATTERN)


def _call(name: str, args_model: type[_Args]) -> type[BaseModel]:
    """Build the tool-call variant ``{"name": <literal>, "arguments": <args_model>}``."""
    cls_name = "".join(part.title() for part in name.split("_")) + "Call"
    return type(
        cls_name,
        (BaseModel,),
        {
            "__annotations__": {"name": Literal[name], "arguments": args_model},  # type: ignore[valid-type]
            "model_config": ConfigDict(extra="forbid", frozen=True),
            "__module__": __name__,
        },
    )


TOOL_ARGS: dict[str, type[_Args]] = {
    "find_user_id_by_email": FindUserIdByEmailArgs,
    "find_user_id_by_name_zip": FindUserIdByNameZipArgs,
    "get_user_details": GetUserDetailsArgs,
    "get_order_details": GetOrderDetailsArgs,
    "get_product_details": GetProductDetailsArgs,
    "list_all_product_types": ListAllProductTypesArgs,
    "calculate": CalculateArgs,
    "think": ThinkArgs,
    "cancel_pending_order": CancelPendingOrderArgs,
    "modify_pending_order_address": ModifyPendingOrderAddressArgs,
    "modify_pending_order_items": ModifyPendingOrderItemsArgs,
    "modify_pending_order_payment": ModifyPendingOrderPaymentArgs,
    "modify_user_address": ModifyUserAddressArgs,
    "return_delivered_order_items": ReturnDeliveredOrderItemsArgs,
    "exchange_delivered_order_items": ExchangeDeliveredOrderItemsArgs,
}
"""The tools a model may call, by τ-bench name. ``transfer_to_human_agents`` is the
separate ``TransferAction`` so that escalation is never confused with a write."""

TOOL_CLASS: dict[str, ToolClass] = {
    "find_user_id_by_email": ToolClass.READ,
    "find_user_id_by_name_zip": ToolClass.READ,
    "get_user_details": ToolClass.READ,
    "get_order_details": ToolClass.READ,
    "get_product_details": ToolClass.READ,
    "list_all_product_types": ToolClass.READ,
    "calculate": ToolClass.READ,
    "think": ToolClass.READ,
    "modify_pending_order_address": ToolClass.REVERSIBLE_WRITE,
    "modify_user_address": ToolClass.REVERSIBLE_WRITE,
    "cancel_pending_order": ToolClass.IRREVERSIBLE_WRITE,
    "modify_pending_order_items": ToolClass.IRREVERSIBLE_WRITE,
    "modify_pending_order_payment": ToolClass.IRREVERSIBLE_WRITE,
    "return_delivered_order_items": ToolClass.IRREVERSIBLE_WRITE,
    "exchange_delivered_order_items": ToolClass.IRREVERSIBLE_WRITE,
}

REFUND_TOOLS = frozenset(name for name, cls in TOOL_CLASS.items() if cls is ToolClass.IRREVERSIBLE_WRITE)
"""Writes that move money; they run as their own ``RefundWorkflow``."""

_CALL_MODELS = {name: _call(name, args) for name, args in TOOL_ARGS.items()}
ToolCall = Annotated[Union[tuple(_CALL_MODELS.values())], Field(discriminator="name")]  # type: ignore[misc]
_TOOL_CALL_ADAPTER: TypeAdapter[Any] = TypeAdapter(ToolCall)


def make_tool_call(name: str, arguments: dict[str, Any]) -> Any:
    """Build a typed tool call; raises ``pydantic.ValidationError`` for an unknown
    tool name or arguments that do not fit the tool's schema."""
    return _TOOL_CALL_ADAPTER.validate_python({"name": name, "arguments": arguments})


def tool_class(name: str) -> ToolClass:
    """The class of a tool; raises ``KeyError`` for an unknown tool."""
    return TOOL_CLASS[name]


def call_arguments(call: Any) -> dict[str, Any]:
    """The tool call's arguments as a plain JSON-able dict."""
    return call.arguments.model_dump(mode="json")


def call_digest(call: Any) -> str:
    """SHA-256 hex of the canonical JSON of ``{name, arguments}``; binds a user's
    confirmation to one exact action detail."""
    payload = json.dumps({"name": call.name, "arguments": call_arguments(call)}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


class ToolCallAction(BaseModel):
    """Call exactly one tool (policy: one tool call at a time, no reply alongside)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["tool_call"] = "tool_call"
    tool: ToolCall


class ReplyAction(BaseModel):
    """Say something to the user and wait for their next message."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["reply"] = "reply"
    text: str = Field(min_length=1, max_length=8000)


class TransferAction(BaseModel):
    """Hand the conversation to a human agent (policy: only when the request is out of scope)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["transfer_to_human"] = "transfer_to_human"
    summary: str = Field(min_length=1, max_length=4000)


class EndAction(BaseModel):
    """Close the conversation with a final message."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["end"] = "end"
    text: str = Field(default="Thank you, goodbye.", max_length=8000)

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        return value or "Thank you, goodbye."


ProposedAction = Annotated[
    Union[ToolCallAction, ReplyAction, TransferAction, EndAction], Field(discriminator="kind")
]
PROPOSED_ACTION_ADAPTER: TypeAdapter[Any] = TypeAdapter(ProposedAction)


def parse_proposed_action(raw: Any) -> Any:
    """Validate a model's raw output (dict) into a ``ProposedAction``.

    Raises ``pydantic.ValidationError`` for malformed output or an unknown tool.
    """
    return PROPOSED_ACTION_ADAPTER.validate_python(raw)


def proposed_action_json_schema() -> dict[str, Any]:
    """JSON schema of ``ProposedAction``; given to the model as the input schema of
    its single ``propose_action`` tool."""
    return PROPOSED_ACTION_ADAPTER.json_schema()


def idempotency_key(call: Any, operation_id: str) -> str:
    """The idempotency key of a write: ``{tool}:{order_id or user_id}:{operation_id}``.

    Built from business identity only: the tool, the order or customer it changes, and
    the operation id the workflow minted (``workflow.uuid4()``) when it accepted the
    proposal. Model text never enters it, so a retried or replayed write maps to the
    same ledger row.
    """
    args = call.arguments
    subject = getattr(args, "order_id", None) or getattr(args, "user_id", None) or "-"
    return f"{call.name}:{subject}:{operation_id}"
