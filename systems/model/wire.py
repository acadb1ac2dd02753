"""The server side of the Messages API wire format, as far as the stand-in speaks it.

The request checks the real API makes that matter to our callers (required fields, tool
``input_schema`` roots, a forced ``tool_choice`` naming an offered tool, the
``metadata`` object), and the bodies it answers with: a message whose only content is
one ``tool_use`` block, and the ``{"type": "error", ...}`` error body.

The stand-in only ever answers with a tool call: to the tool the request forces with
``tool_choice``, else the first tool offered, else ``DEFAULT_TOOL_NAME``. Which of the
caller's own tools that call may name is read from the answered tool's ``input_schema``
(``offered_tool_names``): a provider decoding under the schema never produces another.
"""

from __future__ import annotations

import math
from typing import Any, Optional

DEFAULT_TOOL_NAME = "propose_action"
TOP_LEVEL_COMBINATORS = ("oneOf", "anyOf", "allOf")
MAX_USER_ID_CHARS = 256
"""The real API's bound on ``metadata.user_id``."""


def input_schema_error(schema: Any) -> Optional[str]:
    """Why the Messages API would refuse ``schema`` as a tool ``input_schema``, or None.
    Checks the two root rules we know it enforces."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return "input_schema: the root must be a JSON schema with type 'object'"
    if any(key in schema for key in TOP_LEVEL_COMBINATORS):
        return "input_schema: input_schema does not support oneOf, allOf, or anyOf at the top level"
    return None


def _metadata_problem(metadata: Any) -> Optional[str]:
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        return "metadata: must be an object"
    extra = sorted(set(metadata) - {"user_id"})
    if extra:
        return f"metadata.{extra[0]}: Extra inputs are not permitted"
    user_id = metadata.get("user_id")
    if user_id is not None and (not isinstance(user_id, str) or len(user_id) > MAX_USER_ID_CHARS):
        return f"metadata.user_id: must be a string of at most {MAX_USER_ID_CHARS} characters"
    return None


def request_problem(body: Any) -> Optional[str]:
    """Why the Messages API would answer 400 to ``body``, or None."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    for field in ("model", "max_tokens", "messages"):
        if field not in body:
            return f"{field}: Field required"
    if not isinstance(body["model"], str) or not body["model"]:
        return "model: must be a non-empty string"
    if not isinstance(body["max_tokens"], int) or isinstance(body["max_tokens"], bool) or body["max_tokens"] < 1:
        return "max_tokens: must be a positive integer"
    messages = body["messages"]
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        return "messages: must be a non-empty list of messages"
    if messages[-1].get("role") != "user":
        return "messages: the last message must have role 'user'"
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        return "tools: must be a list"
    names = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or "name" not in tool:
            return f"tools.{i}.name: Field required"
        problem = input_schema_error(tool.get("input_schema"))
        if problem:
            return f"tools.{i}.custom.{problem}"
        names.append(tool["name"])
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "tool" and choice.get("name") not in names:
        return f"tool_choice: tool {choice.get('name')!r} is not in tools"
    return _metadata_problem(body.get("metadata"))


def caller_user_id(body: dict[str, Any]) -> Optional[str]:
    """``metadata.user_id`` of a checked request (the caller's opaque id), or None."""
    metadata = body.get("metadata") or {}
    return metadata.get("user_id") or None


def answered_tool_name(body: dict[str, Any]) -> str:
    """The tool the answer calls: the forced ``tool_choice``, else the first tool offered,
    else ``DEFAULT_TOOL_NAME``."""
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "tool" and choice.get("name"):
        return str(choice["name"])
    tools = body.get("tools") or []
    return str(tools[0]["name"]) if tools else DEFAULT_TOOL_NAME


def _resolve(node: Any, defs: dict[str, Any]) -> Any:
    ref = node.get("$ref") if isinstance(node, dict) else None
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return defs.get(ref.rsplit("/", 1)[-1])
    return node


def offered_tool_names(body: dict[str, Any]) -> Optional[frozenset[str]]:
    """The caller's tool names the answered tool's ``input_schema`` allows under its
    ``tool`` property: each ``oneOf``/``anyOf`` variant's ``name`` (``const`` or ``enum``), or the
    property's own ``name`` when it has no variants.
    An empty set when its ``kind`` enum leaves out ``tool_call``; None when the request
    carries no such tool or its schema does not enumerate names (no limit)."""
    answered = answered_tool_name(body)
    tool = next((t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("name") == answered), None)
    schema = tool.get("input_schema") if tool else None
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return None
    defs = schema.get("$defs") or {}
    prop = _resolve(schema["properties"].get("tool"), defs)
    if prop is None:
        kinds = (schema["properties"].get("kind") or {}).get("enum")
        return frozenset() if isinstance(kinds, list) and "tool_call" not in kinds else None
    # one tool schema names its tools itself (an enum under ``name``) or in each of its variants
    variants = (prop.get("oneOf") or prop.get("anyOf") or [prop]) if isinstance(prop, dict) else None
    if not isinstance(variants, list):
        return None
    names: set[str] = set()
    for variant in variants:
        name = ((_resolve(variant, defs) or {}).get("properties") or {}).get("name") or {}
        if "const" in name:
            names.add(str(name["const"]))
        elif isinstance(name.get("enum"), list):
            names.update(str(v) for v in name["enum"])
        else:
            return None  # a variant whose name is free text: the schema does not limit names
    return frozenset(names)


def text_of(content: Any) -> str:
    """A message's text: a string, or the concatenated ``text`` blocks of a block list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def approx_tokens(text: str) -> int:
    """Roughly four characters per token: good enough for usage accounting offline."""
    return max(1, math.ceil(len(text) / 4))


def tool_use_message(
    *,
    message_id: str,
    tool_use_id: str,
    model: str,
    action: "dict[str, Any] | list[dict[str, Any]]",
    input_tokens: int,
    output_tokens: int,
    tool_name: str = DEFAULT_TOOL_NAME,
    stop_reason: str = "tool_use",
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
) -> dict[str, Any]:
    """A Messages API response body whose only content is one ``tool_use`` of ``tool_name`` per
    action (a list of actions: parallel tool use, the ids numbered from ``tool_use_id``);
    ``stop_reason`` is ``tool_use`` unless the output ran into the request's ``max_tokens``.
    ``usage`` carries the uncached ``input_tokens`` and the cache read/creation counts."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "tool_use", "id": tool_use_id if n == 0 else f"{tool_use_id}_{n}", "name": tool_name,
                     "input": one} for n, one in enumerate(action if isinstance(action, list) else [action])],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                  "cache_creation_input_tokens": cache_creation_input_tokens,
                  "cache_read_input_tokens": cache_read_input_tokens},
    }


def parallel_allowed(body: dict[str, Any]) -> bool:
    """True unless the request's ``tool_choice`` sets ``disable_parallel_tool_use``."""
    choice = body.get("tool_choice")
    return not (isinstance(choice, dict) and choice.get("disable_parallel_tool_use") is True)


def error_body(error_type: str, message: str) -> dict[str, Any]:
    """A Messages API error body, e.g. ``error_type="invalid_request_error"``."""
    return {"type": "error", "error": {"type": error_type, "message": message}}
