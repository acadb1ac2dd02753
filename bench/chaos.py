"""Chaos suite (issue 7 item 8): τ-bench tasks run concurrently on PostgreSQL while worker

The suite lives in ``bench/chaos/``; this script is its command (the same arguments).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.chaos.run import main  # noqa: E402

if __name__ == "__main__":
    main()
