"""A test worker process with a fault, for tests that SIGKILL it mid-activity.

``python -m tests.fault_worker pause-after-write SECONDS MARKER``: its writes pause after
they commit (``tests.faults``). ``python -m tests.fault_worker hang-model MARKER``: its model
call writes the marker and never answers. Settings come from the usual ``STATEKEEPER_*``
environment.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from activities.llm.model_activity import ModelActivities, offline_client
from activities.retail_port import RetailPort
from activities.tools import ToolActivities
from settings import Settings
from tests.faults import PauseAfterWrite
from worker import build_backend, run_worker


def pause_after_write(seconds: float, marker: Path) -> None:
    settings = Settings()
    port = RetailPort(build_backend(settings))
    tools = ToolActivities(tools=PauseAfterWrite(port, seconds, marker), outbox=port, tickets=port)
    asyncio.run(run_worker(settings, tools=tools))


def hang_model(marker: Path) -> None:
    def hanging(view: dict, plan: dict | None = None) -> dict:
        marker.write_text(str(view.get("turn")))
        time.sleep(600)  # the test kills this process long before
        raise AssertionError("unreachable")

    model = ModelActivities(offline_client(600.0, brain=hanging), model="hanging-model")
    asyncio.run(run_worker(Settings(), model=model))


if __name__ == "__main__":
    if sys.argv[1] == "pause-after-write":
        pause_after_write(float(sys.argv[2]), Path(sys.argv[3]))
    elif sys.argv[1] == "hang-model":
        hang_model(Path(sys.argv[2]))
    else:
        raise SystemExit(f"unknown fault {sys.argv[1]!r}")
