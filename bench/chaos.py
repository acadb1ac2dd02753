"""Chaos suite: τ-bench tasks run concurrently on PostgreSQL while worker processes are
SIGKILLed, the external services fail and the Temporal server is restarted.

The suite lives in ``bench/chaos/``; this script is its command (the same arguments).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.chaos.run import main  # noqa: E402

if __name__ == "__main__":
    main()
