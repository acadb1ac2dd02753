"""The model's input, rendered as a pure, deterministic view of the state.

The model sees: the policy, the tool catalogue, the state (customer, orders and
products read so far, steps, completed operations), every pinned fact, only the last
``PROMPT_TURNS`` turns, recent tool observations, and the last rejection reason. It
never sees the full transcript, so the prompt stays bounded however long the
conversation runs, and a fact pinned at turn 4 is still there at turn 30.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from workflows.catalogue import CATALOGUE
from workflows.policy_text import policy_text
from workflows.state import ConversationState

PROMPT_TURNS = 6
PROMPT_OBSERVATIONS = 8
PROMPT_REJECTIONS = 5
PROMPT_STEPS = 10
PROMPT_OPERATIONS = 20
PROMPT_PRODUCTS = 10
STATE_OPEN_TAG = "<state_json>"
STATE_CLOSE_TAG = "</state_json>"

ACTION_GUIDE = (
    "Respond by calling the tool `propose_action` exactly once with one of: "
    '{"kind": "tool_call", "tool": {"name": <tool>, "arguments": {...}}}, '
    '{"kind": "reply", "text": ...}, {"kind": "transfer_to_human", "summary": ...}, '
    '{"kind": "end", "text": ...}. You only propose; the workflow validates every proposal '
    "against the policy and the state, asks the customer to confirm writes, and tells you "
    "when a proposal was rejected and why."
)


class ModelSnapshot(BaseModel):
    """What one model call receives: ``system`` (policy + tools + guide) and
    ``content`` (the state view, as text with a machine-readable JSON block)."""

    system: str
    content: str


def tool_catalogue() -> list[dict[str, Any]]:
    """The tools as ``{name, class, description, parameters}`` (JSON schema of the args)."""
    return [
        {
            "name": spec.name,
            "class": spec.tool_class.value,
            "description": spec.description,
            "parameters": spec.args.model_json_schema(),
        }
        for spec in CATALOGUE.values()
    ]


@lru_cache(maxsize=1)
def render_system() -> str:
    """Policy + tool catalogue + action guide. Identical for every call, so it is built
    once per process (JSON-schema generation is not free) and is prompt-cache friendly."""
    catalogue = json.dumps(tool_catalogue(), sort_keys=True, separators=(",", ":"))
    return (
        "You are the retail support assistant of statekeeper.\n\n## Policy\n"
        f"{policy_text()}\n\n## Tools\n{catalogue}\n\n## How to act\n{ACTION_GUIDE}"
    )


def state_view(state: ConversationState) -> dict[str, Any]:
    """The JSON view of the state given to the model. Everything that grows with the
    conversation is windowed (turns, observations, steps, operations, rejections,
    products); pinned facts are bounded where they are pinned (``workflows.facts``)."""
    return {
        "schema_version": state.schema_version,
        "conversation_id": state.conversation_id,
        "turn": state.turn,
        "status": state.status.value,
        "customer": state.customer.model_dump(mode="json") if state.customer else None,
        "orders": {k: v.model_dump(mode="json") for k, v in state.orders.items()},
        "products": {k: v.model_dump(mode="json") for k, v in list(state.products.items())[-PROMPT_PRODUCTS:]},
        "steps": [s.model_dump(mode="json") for s in state.steps[-PROMPT_STEPS:]],
        "pinned_facts": [f.model_dump(mode="json") for f in state.pinned_facts],
        "recent_turns": [t.model_dump(mode="json") for t in state.recent_turns[-PROMPT_TURNS:]],
        "observations": [o.model_dump(mode="json") for o in state.observations[-PROMPT_OBSERVATIONS:]],
        "pending_confirmation": (
            state.pending_confirmation.model_dump(mode="json") if state.pending_confirmation else None
        ),
        "completed_operations": [
            {k: v for k, v in op.model_dump(mode="json").items() if k not in ("child_workflow_id", "undo_arguments")}
            for op in state.completed_operations[-PROMPT_OPERATIONS:]
        ],
        "rejections": [r.model_dump(mode="json") for r in state.rejections[-PROMPT_REJECTIONS:]],
    }


def render_content(state: ConversationState) -> str:
    """The per-call user content: a short human-readable header plus the state view."""
    view = json.dumps(state_view(state), sort_keys=True, separators=(",", ":"))
    last = state.last_rejection()
    header = [f"Conversation {state.conversation_id}, user turn {state.turn}."]
    if last is not None:
        header.append(f"Your last proposal was rejected under [{last.rule}]: {last.reason}")
    return "\n".join(header) + f"\n{STATE_OPEN_TAG}{view}{STATE_CLOSE_TAG}"


def render_snapshot(state: ConversationState) -> ModelSnapshot:
    """Render the model input for ``state``. Pure: equal states give equal snapshots."""
    return ModelSnapshot(system=render_system(), content=render_content(state))
