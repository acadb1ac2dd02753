"""Helpers to run conversations on the real Temporal server with a real worker."""

from __future__ import annotations

import contextlib
from typing import AsyncIterator, Callable, Optional

from activities.llm.model_activity import ModelActivities, offline_client
from activities.retail.backend import RetailBackend
from settings import Settings
from starter.client import StatekeeperClient
from worker import build_backend, build_worker


@contextlib.asynccontextmanager
async def running_worker(env, settings: Settings, brain: Optional[Callable[[dict, Optional[dict]], dict]] = None
                         ) -> AsyncIterator[tuple[StatekeeperClient, RetailBackend]]:
    """A worker in this process; ``brain(view, plan)`` replaces the offline model's decisions
    (the model is the outside system we fake at its boundary; everything else is real). A
    test brain gets no plan (``plan`` is None); without one, the worker's own offline model
    answers, with the plan book on ``settings``' database."""
    backend = build_backend(settings)
    model = None
    if brain is not None:
        model = ModelActivities(offline_client(30.0, brain=brain), model="test-brain")
    async with build_worker(env.client, settings, backend, model=model):
        yield StatekeeperClient(env.client, settings.task_queue, settings.write_timeout_seconds), backend
