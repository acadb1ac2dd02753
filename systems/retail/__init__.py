"""The reference retail backend (system of record) for the τ-bench retail domain.

``tools`` holds the benchmark's 16 tools as pure functions over the data dicts, each
registered by a decorator that declares the rows it needs (``rows``); ``backend`` is
the multi-tenant SQLAlchemy store that loads those rows and runs a write exactly once
per key (its parts: ``engine``, ``stores``, ``ledger``, ``side_channels``,
``loading``, ``tables``, ``schema``); ``outcome`` the typed results, ``errors`` the
exceptions, ``hashing`` the benchmark's data hash. Imports nothing of statekeeper.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent / "data"
"""The packaged τ-bench retail data (users/orders/products JSON, tasks_dev.json)."""

SECTIONS = ("orders", "products", "users")


@lru_cache(maxsize=1)
def _raw_data() -> dict[str, str]:
    return {name: (DATA_DIR / f"{name}.json").read_text(encoding="utf-8") for name in SECTIONS}


def load_data() -> dict[str, dict[str, Any]]:
    """A fresh, independent copy of the packaged data: ``{"orders", "products", "users"}``,
    each the dict-of-dicts of its JSON file in file order."""
    return {name: json.loads(text) for name, text in _raw_data().items()}
