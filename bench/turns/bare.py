"""The baselines of ``bench/turns.py``'s per-turn latency: the same round trips as a
statekeeper turn with one read (model → read → model → reply) as a bare Temporal workflow,
and as a plain loop in this process. Both call the same model path (``ModelActivities``
over the offline SDK transport and ``bench.turns.worker_process.brain``) and the same read
(``ToolActivities.run_read_tool`` on the retail system), with a minimal view instead of
statekeeper's state, policy, journal and visibility.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

TIMEOUT = timedelta(seconds=30)


@dataclass
class BareTurn:
    """One user turn of the bare workflow: the text and the tiny view it keeps."""

    text: str
    view: dict[str, Any] = field(default_factory=dict)


class BareActivities:
    """``model`` (a ``ModelActivities``) and ``tools`` (a ``ToolActivities``), as activities."""

    def __init__(self, model: Any, tools: Any) -> None:
        self.model, self.tools = model, tools

    @activity.defn(name="bare_model")
    async def bare_model(self, view: dict[str, Any]) -> dict[str, Any]:
        from workflows.domain.contracts import ModelRequest  # noqa: PLC0415

        result = await self.model.propose_action(ModelRequest(conversation_id="bare", view=view))
        return result.action.model_dump(mode="json")

    @activity.defn(name="bare_read")
    async def bare_read(self, call: dict[str, Any]) -> str:
        from workflows.domain.actions import make_tool_call  # noqa: PLC0415
        from workflows.domain.contracts import ReadToolRequest  # noqa: PLC0415

        tool = make_tool_call(call["name"], call["arguments"])
        return (await self.tools.run_read_tool(ReadToolRequest(store="main", call=tool))).result


def tiny_view(text: str, turn: int, observations: list[dict]) -> dict[str, Any]:
    """The least view ``brain`` decides on: the message, the turn and this turn's reads."""
    return {"conversation_id": "bare", "turn": turn, "recent_turns": [{"role": "user", "text": text, "turn": turn}],
            "observations": observations, "orders": {}, "customer": {"user_id": "bench"}}


@workflow.defn(sandboxed=False)
class BareWorkflow:
    """Answers ``turn`` updates: model, then a read when the model asks for one, then the model."""

    def __init__(self) -> None:
        self._turn = 0
        self._done = False

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: self._done)
        return self._turn

    @workflow.signal
    def finish(self) -> None:
        self._done = True

    @workflow.update
    async def turn(self, text: str) -> str:
        self._turn += 1
        observations: list[dict] = []
        for _ in range(3):
            action = await workflow.execute_activity("bare_model", tiny_view(text, self._turn, observations),
                                                     start_to_close_timeout=TIMEOUT)
            if action["kind"] != "tool_call":
                return action.get("text", "")
            result = await workflow.execute_activity("bare_read", action["tool"], start_to_close_timeout=TIMEOUT)
            observations.append({"turn": self._turn, "tool": action["tool"]["name"], "result": result})
        return ""


async def in_process_turn(acts: BareActivities, text: str, turn: int) -> str:
    """The same loop as ``BareWorkflow.turn``, in this process (no Temporal)."""
    observations: list[dict] = []
    for _ in range(3):
        action = await acts.bare_model(tiny_view(text, turn, observations))
        if action["kind"] != "tool_call":
            return action.get("text", "")
        observations.append({"turn": turn, "tool": action["tool"]["name"],
                             "result": await acts.bare_read(action["tool"])})
    return ""
