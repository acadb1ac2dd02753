"""The τ-bench data hash, reproduced so a run's end state can be graded by its hash.

The benchmark hashes ``{"orders": ..., "products": ..., "users": ...}`` by turning
dicts into key-sorted tuples of pairs and lists into tuples, then taking SHA-256 of
Python's ``str()`` of the result. Float formatting and list order therefore matter.
"""

from __future__ import annotations

import hashlib
from typing import Any


def to_hashable(obj: Any) -> Any:
    """Convert nested dicts/lists to the benchmark's hashable nested tuples.

    A dict becomes a tuple of ``(key, converted value)`` pairs sorted by key, a list a
    tuple of converted elements in order; any other value is returned unchanged.
    """
    # Exact-type checks and list comprehensions first: this walks ~100k nodes per hash
    # and the benchmark runner hashes every task's end state.
    kind = type(obj)
    if kind is dict or (kind is not list and isinstance(obj, dict)):
        return tuple([(key, to_hashable(value)) for key, value in sorted(obj.items())])
    if kind is list or isinstance(obj, list):
        return tuple([to_hashable(element) for element in obj])
    return obj


def data_hash(data: dict[str, Any]) -> str:
    """SHA-256 hex digest of ``str(to_hashable(data))`` (UTF-8), as τ-bench grades runs.

    ``data`` is ``{"orders": {...}, "products": {...}, "users": {...}}`` in the shape of
    the benchmark's JSON files.
    """
    return hashlib.sha256(str(to_hashable(data)).encode("utf-8")).hexdigest()
