"""Per-turn latency, history per turn, recovery after a SIGKILL, and throughput by concurrency

The suite lives in ``bench/turns/``; this script is its command (the same arguments).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.turns.run import cli  # noqa: E402

if __name__ == "__main__":
    cli()
