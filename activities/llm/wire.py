"""The client side of the Messages API wire format of our single tool, ``propose_action``.

The activity builds its ``messages.create`` keyword arguments and reads the
``tool_use`` block here. (The offline stand-in model, ``systems.model``, is the server
side and keeps its own copy of what it needs of this format.)

Why the tool's ``input_schema`` is not ``proposed_action_json_schema()`` verbatim:
that schema is a top-level ``oneOf`` (a discriminated union on ``kind``), and the
Messages API rejects any tool whose ``input_schema`` root is not ``type: object`` or
carries ``oneOf``/``anyOf``/``allOf`` ("input_schema does not support oneOf, allOf, or
anyOf at the top level", HTTP 400). ``propose_input_schema()`` therefore flattens the
union into one object schema whose properties are the union of the variants' fields,
with ``kind`` as an enum. The model's input is still exactly a ``ProposedAction``
dict, and ``parse_proposed_action`` (pydantic, strict) remains the real validator.

A prompt version (``workflows.domain.prompt.PROMPT_VERSIONS``) may withhold tools: the schema
of a call then lists only the version's tools under ``tool``, so a provider decoding
under the schema cannot propose the others (the policy still validates whatever comes back).
"""

from __future__ import annotations

import copy
import functools
import hashlib
from typing import Any

from pydantic import ValidationError

from workflows.domain.actions import (MAX_BATCH_CALLS, ToolBatchAction, parse_proposed_action,
                                      proposed_action_json_schema)
from workflows.domain.catalogue import CATALOGUE
from workflows.domain.prompt import PROMPT_VERSION, ModelSnapshot
from workflows.domain.prompt import prompt_version as named_prompt

PROPOSE_TOOL_NAME = "propose_action"
PROPOSE_TOOL_DESCRIPTION = (
    "Propose the single next action of the support process. Set `kind` and only the "
    "fields of that kind: tool_call -> `tool` ({name, arguments}); reply -> `text`; "
    "transfer_to_human -> `summary`; end -> `text` (optional). The workflow validates "
    "the proposal against the policy and the state before anything happens."
)

LEAN_TOOL_DESCRIPTION = ("The next action: set `kind` and only its fields (tool_call: `tool`; reply: `text`; "
                         "transfer_to_human: `summary`; end: `text`, optional).")
"""``propose_action``'s description in the lean layout (its properties say no more)."""


class MalformedOutput(ValueError):
    """The model's response carries no usable proposal: no ``tool_use`` block, a
    ``tool_use`` for another tool, or an input that is not a valid ``ProposedAction``."""


def _strip_discriminators(node: Any) -> Any:
    # "discriminator" is an OpenAPI keyword, not JSON Schema; the variants already pin
    # their tag with "const", so dropping it loses nothing and avoids an unknown keyword.
    # A string "title" is pydantic's annotation of each model and field ("Order Id"): it
    # constrains nothing and would be sent (and paid for) with every call.
    if isinstance(node, dict):
        return {k: _strip_discriminators(v) for k, v in node.items()
                if k != "discriminator" and not (k == "title" and isinstance(v, str))}
    if isinstance(node, list):
        return [_strip_discriminators(v) for v in node]
    return node


def _merge_property(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Loosest common schema of one property shared by two variants (e.g. ``text`` of
    reply, min length 1, and of end, optional): keep only identical keywords."""
    return {k: v for k, v in a.items() if k in b and b[k] == v}


@functools.lru_cache(maxsize=8)
def _flattened_schema(withheld: frozenset[str] = frozenset()) -> dict[str, Any]:
    union = _strip_discriminators(proposed_action_json_schema())
    defs = union.get("$defs", {})
    kinds: list[str] = []
    properties: dict[str, dict[str, Any]] = {}
    used_by: dict[str, list[str]] = {}
    for ref in union["oneOf"]:
        variant = defs[ref["$ref"].rsplit("/", 1)[-1]]
        kind = variant["properties"]["kind"]["const"]
        kinds.append(kind)
        for name, prop in variant["properties"].items():
            if name == "kind":
                continue
            prop = {k: v for k, v in prop.items() if k != "default"}
            properties[name] = _merge_property(properties[name], prop) if name in properties else prop
            used_by.setdefault(name, []).append(kind)
    for name, kinds_using in used_by.items():
        properties[name]["description"] = "Only with kind " + " or ".join(kinds_using) + "."
    _withhold(properties, kinds, defs, withheld)
    schema = {
        "type": "object",
        "properties": {"kind": {"type": "string", "enum": kinds}, **properties},
        "required": ["kind"],
        "additionalProperties": False,
    }
    schema["$defs"] = {name: defs[name] for name in sorted(_reachable(schema, defs))}
    return schema


def _withhold(properties: dict[str, Any], kinds: list[str], defs: dict[str, Any], withheld: frozenset[str]) -> None:
    """Drop the tool-call variants of the ``withheld`` tools from ``properties["tool"]``
    (in place); with no tool left, ``tool_call`` leaves the ``kind`` enum as well."""
    if not withheld:
        return
    tool = properties["tool"]
    offered = [ref for ref in tool["oneOf"]
               if defs[ref["$ref"].rsplit("/", 1)[-1]]["properties"]["name"].get("const") not in withheld]
    if offered:
        tool["oneOf"] = offered
    else:
        del properties["tool"]
        kinds.remove("tool_call")


def _reachable(node: Any, defs: dict[str, Any], seen: set[str] | None = None) -> set[str]:
    """Names of the ``$defs`` entries ``node`` refers to, transitively (the variant
    wrappers themselves are no longer referenced once flattened)."""
    seen = set() if seen is None else seen
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.rsplit("/", 1)[-1]
            if name not in seen:
                seen.add(name)
                _reachable(defs[name], defs, seen)
        for value in node.values():
            _reachable(value, defs, seen)
    elif isinstance(node, list):
        for value in node:
            _reachable(value, defs, seen)
    return seen


@functools.lru_cache(maxsize=8)
def _described_schema(withheld: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The flattened schema as the cached layout offers it: the one place the model reads the
    tools. Each tool-call variant carries its tool's class and description (the system prompt
    does not list them), its arguments inline (one def fewer per tool), and no ``type``
    beside a ``const``."""
    schema = copy.deepcopy(_flattened_schema(withheld))
    defs = schema["$defs"]
    for ref in (schema["properties"].get("tool") or {}).get("oneOf", []):
        call = defs[ref["$ref"].rsplit("/", 1)[-1]]
        name = call["properties"]["name"]
        name.pop("type", None)
        spec = CATALOGUE[name["const"]]
        call["description"] = f"{spec.tool_class.value}: {spec.description}"
        arguments = call["properties"]["arguments"].get("$ref")
        if isinstance(arguments, str):
            call["properties"]["arguments"] = defs[arguments.rsplit("/", 1)[-1]]
    body = {k: v for k, v in schema.items() if k != "$defs"}
    schema["$defs"] = {name: defs[name] for name in sorted(_reachable(body, defs))}
    return schema


def _signature(spec: Any, description: str) -> str:
    """``name(arg, list_arg[], number_arg: number): description`` of one catalogue tool."""
    parts = []
    for name, prop in (spec.args.model_json_schema().get("properties") or {}).items():
        kind = prop.get("type")
        parts.append(name if kind == "string" else f"{name}[]" if kind == "array" else f"{name}: number")
    return f"{spec.name}({', '.join(parts)}): {description}"


LEAN_TOOL_PREAMBLE = ("The tools as name(arguments): what it does, under their class; every argument is required, a "
                      "string unless marked [] (a list of strings) or number.")


def _tool_lines(offered: list[Any], version: Any) -> list[str]:
    """The lean schema's tool list: the preamble, then each class's heading and its tools'
    signatures, described as prompt ``version`` (a ``PromptVersion``) words them."""
    lines = [LEAN_TOOL_PREAMBLE]
    for tool_class in dict.fromkeys(spec.tool_class for spec in offered):
        lines.append(f"{tool_class.value}:")
        lines.extend(_signature(spec, version.description(spec)) for spec in offered if spec.tool_class is tool_class)
    return lines


@functools.lru_cache(maxsize=32)
def _lean_schema(version: str = PROMPT_VERSION) -> dict[str, Any]:
    """``propose_action``'s schema in the lean layout: ``tool`` is ``{name, arguments}`` with
    ``name`` one of the version's tools (an enum) and each tool's signature, class and description
    one line of its description. A proposal's arguments are checked by ``parse_proposed_action``
    against the tool's strict argument model (names, types, sizes), as in every layout. Raises
    ``UnknownPromptVersion``."""
    named = named_prompt(version)
    withheld = named.withheld_tools
    flat = _flattened_schema(withheld)
    kinds = flat["properties"]["kind"]["enum"]
    properties: dict[str, Any] = {"kind": {"type": "string", "enum": kinds}}
    offered = [spec for name, spec in CATALOGUE.items() if name not in withheld]
    if offered:
        properties["tool"] = {
            "type": "object",
            "description": "\n".join(_tool_lines(offered, named)),
            "properties": {"name": {"enum": [spec.name for spec in offered]}, "arguments": {"type": "object"}},
            "required": ["name", "arguments"],
        }
    properties.update(text={"type": "string"}, summary={"type": "string"})
    return {"type": "object", "properties": properties, "required": ["kind"], "additionalProperties": False}


def _schema_of(version: str) -> dict[str, Any]:
    """The cached (not copied) ``input_schema`` of prompt ``version``, by its layout."""
    named = named_prompt(version)
    if named.layout == "lean":
        return _lean_schema(version)
    if named.layout == "cached":
        return _described_schema(named.withheld_tools)
    return _flattened_schema(named.withheld_tools)


def propose_input_schema(version: str = PROMPT_VERSION) -> dict[str, Any]:
    """The ``input_schema`` of ``propose_action`` under prompt ``version``: an object schema
    (no top-level combinator) whose instances are ``ProposedAction`` dicts calling only the
    version's tools (with their descriptions in the cached layout). Returns a fresh copy.
    Raises ``UnknownPromptVersion``."""
    return copy.deepcopy(_schema_of(version))


def propose_tool_param(version: str = PROMPT_VERSION) -> dict[str, Any]:
    """The ``tools=[...]`` entry of prompt ``version``: ``{"name", "description", "input_schema"}``.
    The schema is the cached one, not a copy (a deep copy of it cost milliseconds of CPU per
    model call): do not mutate it; the SDK copies what it sends."""
    lean = named_prompt(version).layout == "lean"
    return {
        "name": PROPOSE_TOOL_NAME,
        "description": LEAN_TOOL_DESCRIPTION if lean else PROPOSE_TOOL_DESCRIPTION,
        "input_schema": _schema_of(version),
    }


def forced_tool_choice() -> dict[str, Any]:
    """``tool_choice`` forcing ``propose_action``, with parallel tool use on: reads that do not
    depend on each other come as several ``propose_action`` calls in one response, which
    ``read_proposal`` reads as one ``ToolBatchAction``."""
    return {"type": "tool", "name": PROPOSE_TOOL_NAME, "disable_parallel_tool_use": False}


EPHEMERAL = {"type": "ephemeral"}
"""The ``cache_control`` of a prompt-cache breakpoint (default 5-minute lifetime)."""


def build_create_kwargs(
    snapshot: ModelSnapshot, *, model: str, max_tokens: int, conversation_id: str,
    prompt_version: str = PROMPT_VERSION,
) -> dict[str, Any]:
    """Keyword arguments of ``client.messages.create`` for one stateless call:
    ``system`` is the snapshot's system text, the single user message its content,
    ``metadata.user_id`` the conversation id (``api_user_id``: the API's opaque end-user id; the offline
    stand-in finds a conversation's registered plan by it), and the tool's schema offers
    the tools of ``prompt_version`` (the version the snapshot was rendered with).

    A snapshot with ``stable`` blocks (the cached layout, ``workflows.domain.prompt``) is sent
    as content blocks with ``cache_control`` breakpoints: on the system block (covering tools
    + system, shared by every conversation) and on each stable block; the volatile content
    comes last, unmarked. That is 1 + len(stable) breakpoints, at most the API's 4.
    Raises ``UnknownPromptVersion``."""
    system: Any = snapshot.system
    content: Any = snapshot.content
    if snapshot.stable or snapshot.log:
        system = [{"type": "text", "text": snapshot.system, "cache_control": dict(EPHEMERAL)}]
        content = [{"type": "text", "text": block, "cache_control": dict(EPHEMERAL)} for block in snapshot.stable]
        content += [{"type": "text", "text": block} for block in snapshot.log]
        if snapshot.log:
            content[-1]["cache_control"] = dict(EPHEMERAL)
        content.append({"type": "text", "text": snapshot.content})
    return {
        "model": model,
        "max_tokens": max_tokens,
        "system": system,
        "messages": [{"role": "user", "content": content}],
        "tools": [propose_tool_param(prompt_version)],
        "tool_choice": forced_tool_choice(),
        "metadata": {"user_id": api_user_id(conversation_id)},
    }


MAX_USER_ID_CHARS = 256
"""The Messages API's bound on ``metadata.user_id`` (a longer one is a 400 on every call)."""


def api_user_id(conversation_id: str) -> str:
    """``metadata.user_id`` of a conversation's calls: its id, or ``sha256:<hex>`` of it when
    the id is longer than the API takes. The Python client takes conversation ids up to
    Temporal's bound (992 bytes): sent whole, one over 256 characters had every model call
    refused (400), so the conversation could answer nothing. Still opaque and one per
    conversation; the offline stand-in's benchmark plans use short ids, sent as they are."""
    if len(conversation_id) <= MAX_USER_ID_CHARS:
        return conversation_id
    return "sha256:" + hashlib.sha256(conversation_id.encode("utf-8", "surrogatepass")).hexdigest()


def validation_summary(err: ValidationError, limit: int = 5) -> str:
    """A one-line summary of a pydantic error: ``loc: msg`` for the first ``limit`` errors."""
    parts = []
    for item in err.errors()[:limit]:
        loc = ".".join(str(p) for p in item.get("loc", ())) or "<root>"
        parts.append(f"{loc}: {item.get('msg', '')}")
    more = err.error_count() - limit
    return "; ".join(parts) + (f"; (+{more} more)" if more > 0 else "")


def extract_tool_inputs(message: Any) -> list[dict[str, Any]]:
    """The ``input`` of each ``propose_action`` ``tool_use`` block of an SDK ``Message``, in order.

    Raises ``MalformedOutput`` when there is no ``tool_use`` block (e.g. a text answer),
    when the response stopped for any reason but completing its tool calls (``stop_reason``
    other than ``tool_use``: ``max_tokens``, ``refusal``, ``pause_turn``...), when a block names
    another tool, when there are more than ``MAX_BATCH_CALLS`` of them, or when an input is not
    a JSON object.
    """
    blocks = [b for b in (getattr(message, "content", None) or []) if getattr(b, "type", None) == "tool_use"]
    stop = getattr(message, "stop_reason", None)
    if not blocks:
        raise MalformedOutput(f"no tool_use block in the response (stop_reason={stop!r})")
    if stop != "tool_use":
        # cut off (max_tokens), refused, paused...: an input that still validates may be only
        # part of what the model meant (1 of 4 items to return), so it is never acted on
        raise MalformedOutput(f"the response stopped before completing its tool call (stop_reason={stop!r})")
    if len(blocks) > MAX_BATCH_CALLS:
        raise MalformedOutput(f"the response holds {len(blocks)} tool calls; at most {MAX_BATCH_CALLS} are read")
    for block in blocks:
        if block.name != PROPOSE_TOOL_NAME:
            raise MalformedOutput(f"tool_use names unknown tool {block.name!r}, expected {PROPOSE_TOOL_NAME!r}")
        if not isinstance(block.input, dict):
            raise MalformedOutput(f"tool_use input is {type(block.input).__name__}, expected an object")
    return [block.input for block in blocks]


def read_proposal(message: Any) -> Any:
    """The validated proposal of an SDK ``Message``: one ``ProposedAction``, or, for several
    ``propose_action`` calls (parallel tool use), one ``ToolBatchAction`` of their tool calls.

    Raises ``MalformedOutput`` (see ``extract_tool_inputs``), including when an input fails
    ``parse_proposed_action`` (the message then carries the pydantic summary) and when several
    calls hold anything but tool calls: a reply, an end or a transfer comes alone, and acting
    on part of such an answer would drop the rest silently, the same loss as a cut-off input.
    """
    # Models sometimes send the other kinds' fields as null; they carry no meaning, so
    # drop them rather than spend a retry on them. Everything else is validated strictly.
    actions = []
    for raw in extract_tool_inputs(message):
        try:
            actions.append(parse_proposed_action({k: v for k, v in raw.items() if v is not None}))
        except ValidationError as err:
            raise MalformedOutput(
                f"propose_action input is not a valid ProposedAction: {validation_summary(err)}") from err
    if len(actions) == 1:
        return actions[0]
    if any(action.kind != "tool_call" for action in actions):
        raise MalformedOutput(f"the response holds {len(actions)} proposals; only tool calls may come together")
    return ToolBatchAction(tools=[action.tool for action in actions])