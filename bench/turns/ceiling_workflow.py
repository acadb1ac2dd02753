"""The least conversation statekeeper's structure allows, for ``bench/turns/ceiling.py``.

``CeilingWorkflow`` answers the bench conversation (authenticate, ask about an order, cancel
it, confirm) with only the round trips statekeeper needs: each model call an activity
that heartbeats (``ModelActivities.propose_action`` over the offline stand-in and
``bench.turns.worker_process.brain``), each read a local activity (``ToolActivities.run_read_tool``),
the confirmed write an activity with an idempotency key (``run_write_tool``), one update per
message. Nothing else: no policy, state model, journal, search attributes, refund child or
ledger lookup, and a view of a few fields where statekeeper renders its whole state. Its
turns per CPU-second bound what any implementation of that structure can reach on this
server and worker.

``python bench/turns/ceiling_workflow.py`` runs its worker on the ``STATEKEEPER_*`` settings of the
environment, with statekeeper's sandbox, slots and data converter (codec included).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.options import HEARTBEAT_TIMEOUT, MODEL_RETRY, MODEL_TIMEOUT, READ_RETRY, READ_TIMEOUT, WRITE_RETRY

WRITE_TIMEOUT = timedelta(seconds=30)


@workflow.defn
class CeilingWorkflow:
    """Input: the store; one ``send`` update per user message, returning the reply."""

    def __init__(self) -> None:
        self._turn = 0
        self._customer: dict[str, Any] = {}
        self._orders: dict[str, dict[str, Any]] = {}
        self._pending: dict[str, Any] | None = None
        self._done = False
        self._store = ""

    @workflow.run
    async def run(self, store: str) -> int:
        self._store = store
        await workflow.wait_condition(lambda: self._done)
        return self._turn

    @workflow.signal
    def finish(self) -> None:
        self._done = True

    @workflow.update
    async def send(self, text: str) -> str:
        self._turn += 1
        observations: list[dict[str, Any]] = []
        if self._pending is not None and text.lower().startswith("yes"):
            call, self._pending = self._pending, None
            key = f"{call['name']}:{call['arguments']['order_id']}:{workflow.info().workflow_id}"
            await workflow.execute_activity(
                "run_write_tool", {"store": self._store, "call": call, "idempotency_key": key},
                start_to_close_timeout=WRITE_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=WRITE_RETRY)
        for call_seq in range(1, 4):
            result = await workflow.execute_activity(
                "propose_action", {"conversation_id": workflow.info().workflow_id, "turn": self._turn,
                                   "call_seq": call_seq, "view": self._view(text, observations)},
                start_to_close_timeout=MODEL_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=MODEL_RETRY)
            action = result["action"]
            if action["kind"] != "tool_call":
                return action.get("text", "")
            call = action["tool"]
            if call["name"] == "cancel_pending_order":
                self._pending = call
                return f"Cancel {call['arguments']['order_id']}? Say yes to confirm."
            read = await workflow.execute_local_activity(
                "run_read_tool", {"store": self._store, "call": call},
                start_to_close_timeout=READ_TIMEOUT, retry_policy=READ_RETRY)
            self._fold(call, read["result"])
            observations.append({"turn": self._turn, "tool": call["name"]})
        return ""

    def _fold(self, call: dict[str, Any], result: str) -> None:
        if call["name"] == "find_user_id_by_email" and not result.startswith("Error"):
            self._customer = {"user_id": result}
        elif call["name"] == "get_order_details":
            self._orders[call["arguments"]["order_id"]] = {"read_turn": self._turn}

    def _view(self, text: str, observations: list[dict[str, Any]]) -> dict[str, Any]:
        return {"conversation_id": workflow.info().workflow_id, "turn": self._turn,
                "recent_turns": [{"role": "user", "text": text, "turn": self._turn}],
                "observations": observations, "orders": self._orders, "customer": self._customer or None}


def build_ceiling_worker(client: Any, settings: Any, backend: Any = None) -> Any:
    """A ``Worker`` for ``CeilingWorkflow`` on ``settings.task_queue``: the offline model with
    ``bench.turns.worker_process.brain``, the retail tools over ``backend`` (default: ``settings``'
    database), statekeeper's sandbox and slots (``worker.build_worker``'s)."""
    from temporalio.worker import Worker  # noqa: PLC0415

    from activities.llm.model_activity import ModelActivities, offline_client  # noqa: PLC0415
    from bench.turns.worker_process import brain  # noqa: PLC0415
    from starter.runtime.worker import build_backend, build_tool_activities, workflow_runner  # noqa: PLC0415

    tools = build_tool_activities(settings, backend or build_backend(settings))
    model = ModelActivities(offline_client(600.0, brain=brain), model="bench-brain")
    return Worker(client, task_queue=settings.task_queue, workflows=[CeilingWorkflow],
                  activities=[model.propose_action, tools.run_read_tool, tools.run_write_tool],
                  workflow_runner=workflow_runner(settings.sandbox_project_modules, settings.workflow_sandbox),
                  max_concurrent_activities=settings.activity_slots(),
                  max_concurrent_local_activities=settings.activity_slots(),
                  max_concurrent_workflow_tasks=settings.max_concurrent_workflow_tasks,
                  max_cached_workflows=settings.max_cached_workflows,
                  sticky_queue_schedule_to_start_timeout=timedelta(seconds=settings.sticky_schedule_to_start_seconds))


async def _serve() -> None:
    from settings import Settings  # noqa: PLC0415
    from starter.runtime.connection import connect  # noqa: PLC0415
    from starter.runtime.worker import run_until_signalled  # noqa: PLC0415

    settings = Settings()
    worker = build_ceiling_worker(await connect(settings), settings)
    print("CEILING polling", flush=True)
    await run_until_signalled(worker)


if __name__ == "__main__":
    import asyncio
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    asyncio.run(_serve())
