"""Input tokens per model call: statekeeper (its state, cache-friendly layout and prompt

The suite lives in ``bench/tokens/``; this script is its command (the same arguments).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.tokens.run import main  # noqa: E402

if __name__ == "__main__":
    main()
