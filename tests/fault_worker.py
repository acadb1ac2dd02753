"""A test worker process whose writes pause after they commit (``tests.faults``).

Run as ``python -m tests.fault_worker SECONDS MARKER`` with the usual ``STATEKEEPER_*``
environment; the crash-recovery test SIGKILLs it during the pause.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from activities.retail_port import RetailPort
from activities.tools import ToolActivities
from settings import Settings
from tests.faults import PauseAfterWrite
from worker import build_backend, run_worker


def main(seconds: float, marker: Path) -> None:
    settings = Settings()
    port = RetailPort(build_backend(settings))
    tools = ToolActivities(tools=PauseAfterWrite(port, seconds, marker), outbox=port, tickets=port)
    asyncio.run(run_worker(settings, tools=tools))


if __name__ == "__main__":
    main(float(sys.argv[1]), Path(sys.argv[2]))
