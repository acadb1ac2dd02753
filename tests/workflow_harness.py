"""Helpers to run conversations on the real Temporal server with a real worker."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import AsyncIterator, Callable, Optional

from activities.llm.model_activity import ModelActivities, offline_client
from activities.retail_port import RetailPort
from activities.tools import ToolActivities
from settings import Settings
from starter.client import StatekeeperClient
from systems.retail.backend import RetailBackend
from tests.faults import PauseAfterWrite
from worker import build_backend, build_worker


@contextlib.asynccontextmanager
async def running_worker(env, settings: Settings, brain: Optional[Callable[[dict, Optional[dict]], dict]] = None,
                         pause_after_write: Optional[tuple[float, Path]] = None,
                         ) -> AsyncIterator[tuple[StatekeeperClient, RetailBackend]]:
    """A worker in this process; ``brain(view, plan)`` replaces the offline model's decisions
    (the model is the outside system we fake at its boundary; everything else is real). A
    test brain gets no plan (``plan`` is None); without one, the worker's own offline model
    answers, with the plan book on ``settings``' database. ``pause_after_write=(seconds,
    marker)`` pauses each applied write after its commit (``tests.faults``)."""
    backend = build_backend(settings)
    model = None
    if brain is not None:
        model = ModelActivities(offline_client(30.0, brain=brain), model="test-brain")
    port = RetailPort(backend)
    tool_port = PauseAfterWrite(port, *pause_after_write) if pause_after_write else port
    tools = ToolActivities(tools=tool_port, outbox=port, tickets=port)
    async with build_worker(env.client, settings, backend, model=model, tools=tools):
        yield StatekeeperClient(env.client, settings.task_queue, settings.write_timeout_seconds), backend
