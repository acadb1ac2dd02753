"""Helpers to run conversations on the real Temporal server with a real worker, test
brains that fake the model at its boundary, and reads of the system of record."""

from __future__ import annotations

import contextlib
import json
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


# --- test brains and reads of the system of record -----------------------------------


def call(name: str, **arguments) -> dict:
    """A tool-call proposal, as a test brain returns it."""
    return {"kind": "tool_call", "tool": {"name": name, "arguments": arguments}}


def reply(text: str) -> dict:
    """A reply proposal, as a test brain returns it."""
    return {"kind": "reply", "text": text}


class ListBrain:
    """Returns the queued actions in order, then replies 'ok'. Records every view."""

    def __init__(self, actions: list[dict]) -> None:
        self.actions = list(actions)
        self.views: list[dict] = []

    def __call__(self, view: dict, plan: dict | None = None) -> dict:
        self.views.append(view)
        return self.actions.pop(0) if self.actions else reply("ok")


def order_details(backend: RetailBackend, order_id: str, store: str = "main") -> dict:
    """The order as the system of record holds it now."""
    return json.loads(backend.read(store, "get_order_details", {"order_id": order_id}))


def user_details(backend: RetailBackend, user_id: str, store: str = "main") -> dict:
    """The customer as the system of record holds them now."""
    return json.loads(backend.read(store, "get_user_details", {"user_id": user_id}))
