"""A test worker process with a fault, for tests that SIGKILL it mid-activity.

``python -m tests.fault_worker pause-after-write SECONDS MARKER``: its writes pause after
they commit (``tests.faults``). ``python -m tests.fault_worker hang-model MARKER``: its model
call writes the marker and never answers. ``python -m tests.fault_worker hang-read MARKER``: its
order reads write the marker and never answer. Settings come from the usual ``STATEKEEPER_*``
environment. Each runs like ``python worker.py`` (``worker.main``: graceful shutdown on
SIGTERM/SIGINT, exit without joining a busy database thread).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from activities.llm.model_activity import ModelActivities, offline_client
from activities.retail_port import RetailPort
from activities.tools import ToolActivities
from settings import Settings
from tests.faults import PauseAfterWrite, SlowReads
from starter.runtime.worker import build_backend, main, run_worker


def pause_after_write(seconds: float, marker: Path) -> None:
    settings = Settings()
    port = RetailPort(build_backend(settings))
    tools = ToolActivities(tools=PauseAfterWrite(port, seconds, marker), outbox=port, tickets=port)
    main(lambda: run_worker(settings, tools=tools))


def hang_model(marker: Path) -> None:
    async def hanging(view: dict, plan: dict | None = None) -> dict:
        marker.write_text(str(view.get("turn")))
        await asyncio.sleep(600)  # waiting for the provider; the test kills this process long before
        raise AssertionError("unreachable")

    model = ModelActivities(offline_client(600.0, brain=hanging), model="hanging-model")
    main(lambda: run_worker(Settings(), model=model))


class _MarkingSlowReads(SlowReads):
    """``SlowReads`` that first writes ``marker`` (the test's cue to kill the worker)."""

    def __init__(self, marker: Path) -> None:
        super().__init__(600.0, frozenset({"get_order_details"}))
        self._marker = marker

    def invoke(self, store, tool, arguments, **kwargs):
        if kwargs.get("idempotency_key") is None and tool in self._tools:
            self._marker.write_text(tool)
        return super().invoke(store, tool, arguments, **kwargs)


def hang_read(marker: Path) -> None:
    settings = Settings()
    port = RetailPort(build_backend(settings))
    tools = ToolActivities(tools=_MarkingSlowReads(marker).attach(port), outbox=port, tickets=port)
    main(lambda: run_worker(settings, tools=tools))


if __name__ == "__main__":
    if sys.argv[1] == "pause-after-write":
        pause_after_write(float(sys.argv[2]), Path(sys.argv[3]))
    elif sys.argv[1] == "hang-model":
        hang_model(Path(sys.argv[2]))
    elif sys.argv[1] == "hang-read":
        hang_read(Path(sys.argv[2]))
    else:
        raise SystemExit(f"unknown fault {sys.argv[1]!r}")
