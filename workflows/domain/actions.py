"""Typed proposals the model may make.

The model never acts: it returns one ``ProposedAction`` (a discriminated union on
``kind``) and the workflow decides. A tool call's arguments are the strict model of
its spec in ``workflows.domain.catalogue`` (``extra="forbid"``), so a proposal carrying an
invented field, such as an amount, is a schema error and never reaches a tool.

Pure and deterministic: imported inside the Temporal workflow sandbox.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from workflows.domain.catalogue import CATALOGUE, READERS, ToolArgs


def _call(name: str, args_model: type[ToolArgs]) -> type[BaseModel]:
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


_CALL_MODELS = {name: _call(name, spec.args) for name, spec in CATALOGUE.items()}
ToolCall = Annotated[Union[tuple(_CALL_MODELS.values())], Field(discriminator="name")]  # type: ignore[misc]
_TOOL_CALL_ADAPTER: TypeAdapter[Any] = TypeAdapter(ToolCall)


def make_tool_call(name: str, arguments: dict[str, Any]) -> Any:
    """Build a typed tool call; raises ``pydantic.ValidationError`` for an unknown
    tool name or arguments that do not fit the tool's schema."""
    return _TOOL_CALL_ADAPTER.validate_python({"name": name, "arguments": arguments})


def read_of(subject: str, value: str) -> Any:
    """The typed call of the read returning the document of ``subject`` ``value`` (the
    catalogue's ``READERS``: ``read_of("order_id", "#W1")`` reads order #W1). Raises
    ``KeyError`` for an argument no read returns the document of."""
    return make_tool_call(READERS[subject], {subject: value})


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

MAX_READS_PER_BATCH = 8
"""Reads one answer may propose together (parallel tool use); the workflow refuses the rest
of a longer batch with a reason (clause one-action)."""
MAX_BATCH_CALLS = 64
"""Tool calls a batch may hold at all: an answer with more is malformed output."""


class ToolBatchAction(BaseModel):
    """Several tool calls proposed in one answer (parallel tool use: one ``propose_action``
    call per tool call). The workflow runs the reads together, at most ``MAX_READS_PER_BATCH``;
    a write in a batch is refused (a write is proposed alone and confirmed; clause one-action)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["tool_calls"] = "tool_calls"
    tools: list[ToolCall] = Field(min_length=2, max_length=MAX_BATCH_CALLS)  # type: ignore[valid-type]


ModelProposal = Annotated[
    Union[ToolCallAction, ReplyAction, TransferAction, EndAction, ToolBatchAction], Field(discriminator="kind")
]
"""What one model answer proposes: a ``ProposedAction``, or a batch of tool calls made of several."""
MODEL_PROPOSAL_ADAPTER: TypeAdapter[Any] = TypeAdapter(ModelProposal)


def parse_model_proposal(raw: Any) -> Any:
    """Validate a recorded proposal (dict) into a ``ModelProposal``: a ``ProposedAction`` or a
    ``ToolBatchAction``. Raises ``pydantic.ValidationError`` when it is neither."""
    return MODEL_PROPOSAL_ADAPTER.validate_python(raw)


def parse_proposed_action(raw: Any) -> Any:
    """Validate a model's raw output (dict) into a ``ProposedAction``.

    Raises ``pydantic.ValidationError`` for malformed output or an unknown tool.
    """
    return PROPOSED_ACTION_ADAPTER.validate_python(raw)


def proposed_action_json_schema() -> dict[str, Any]:
    """JSON schema of ``ProposedAction``; given to the model as the input schema of
    its single ``propose_action`` tool."""
    return PROPOSED_ACTION_ADAPTER.json_schema()
