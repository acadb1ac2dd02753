"""Scanning what Temporal and our logs hold for customers' personal data in plaintext: raw
histories fetched WITHOUT the codec, the Temporal server's database file, and log files.

Two kinds of needles per customer (from the τ-bench users):
- *distinctive* values, searched everywhere, even in raw binary (the database file): the
  e-mail, the full name ("First Last"), the customer id (``first_last_1234``: it holds the
  name), the street address (``address1``) and every payment method id;
- *name words* (first name, last name), searched as whole words in text only (logs, and
  histories with their ciphertext left out): three random bytes spell "Ito" about once a
  megabyte, so binary blobs would report noise, not leaks.
"""

from __future__ import annotations

import base64
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional

from temporalio.api.common.v1 import Payload
from temporalio.api.history.v1 import History
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from starter.runtime.codec import ENCODING

ENCRYPTED_B64 = base64.b64encode(ENCODING).decode()


@dataclass
class Needles:
    """What to look for: ``distinctive`` values and ``words`` (names), each with its kind."""

    distinctive: dict[str, str] = field(default_factory=dict)
    words: dict[str, str] = field(default_factory=dict)


def needles_for(users: dict, user_ids: Iterable[str]) -> Needles:
    """The personal data of ``user_ids`` in the τ-bench ``users`` table."""
    found = Needles()
    for user_id in user_ids:
        user = users[user_id]
        first, last = user["name"]["first_name"], user["name"]["last_name"]
        found.distinctive.update({user["email"]: "email", f"{first} {last}": "name", user_id: "name",
                                  user["address"]["address1"]: "address"})
        found.distinctive.update({pm: "payment method id" for pm in user["payment_methods"]})
        found.words.update({first: "name", last: "name"})
    return found


def count_in_bytes(blob: bytes, needles: Needles) -> Counter:
    """Occurrences of the distinctive needles in ``blob`` (case-insensitive), by kind."""
    lowered = blob.lower()
    counts: Counter = Counter()
    for value, kind in needles.distinctive.items():
        counts[kind] += lowered.count(value.lower().encode())
    return counts


def count_in_text(text: str, needles: Needles) -> Counter:
    """Occurrences of every needle in ``text``: distinctive values as substrings, names as
    whole words (case-insensitive), by kind."""
    counts = count_in_bytes(text.encode(), needles)
    for word, kind in needles.words.items():
        counts[kind] += len(re.findall(rf"(?<![A-Za-z]){re.escape(word)}(?![A-Za-z])", text, re.IGNORECASE))
    return counts


def readable(node, decrypt: Optional[Callable[[Payload], Payload]] = None):
    """A history's JSON with every payload made readable as the server holds it: a plain
    payload's data and all metadata decoded from base64; an encrypted payload's data
    replaced by ``<ciphertext>`` (random bytes are no text to search), or, given ``decrypt``
    (the codec's), by its decrypted content."""
    if isinstance(node, list):
        return [readable(n, decrypt) for n in node]
    if not isinstance(node, dict):
        return node
    if isinstance(node.get("metadata"), dict) and ("data" in node or "encoding" in node["metadata"]):
        metadata = {k: _text(v) for k, v in node["metadata"].items()}
        if node["metadata"].get("encoding") != ENCRYPTED_B64:
            return {"metadata": metadata, "data": _text(node.get("data", ""))}
        if decrypt is None:
            return {"metadata": metadata, "data": "<ciphertext>"}
        inner = decrypt(Payload(metadata={k: base64.b64decode(v) for k, v in node["metadata"].items()},
                                data=base64.b64decode(node.get("data", ""))))
        return {"metadata": {k: v.decode("utf-8", "replace") for k, v in inner.metadata.items()},
                "data": inner.data.decode("utf-8", "replace")}
    return {k: readable(v, decrypt) for k, v in node.items()}


def _text(b64: str) -> str:
    try:
        return base64.b64decode(b64).decode("utf-8")
    except ValueError:
        return b64


async def raw_histories(address: str, namespace: str = "default",
                        decrypt: Optional[Callable[[Payload], Payload]] = None) -> dict[str, tuple[bytes, str]]:
    """Every workflow run's history as the server gives it to a client WITHOUT the codec:
    ``{workflow_id/run_id: (serialized proto, readable JSON)}`` (``decrypt``: see ``readable``)."""
    client = await Client.connect(address, namespace=namespace, data_converter=pydantic_data_converter)
    found = {}
    async for execution in client.list_workflows():
        history = await client.get_workflow_handle(execution.id, run_id=execution.run_id).fetch_history()
        raw = History(events=history.events).SerializeToString()
        found[f"{execution.id}/{execution.run_id}"] = (raw, json.dumps(readable(json.loads(history.to_json()), decrypt)))
    return found


def scan_histories(histories: dict[str, tuple[bytes, str]], needles: Needles) -> Counter:
    """Personal data in ``raw_histories``: distinctive values in the raw bytes, every needle
    in the readable JSON (a value counted once per place it is found)."""
    total: Counter = Counter()
    for raw, text in histories.values():
        total += count_in_bytes(raw, needles) + count_in_text(text, needles)
    return total


def scan_files(paths: Iterable[Path], needles: Needles, text: bool) -> Counter:
    """Personal data in files: as text (logs: every needle) or as bytes (databases:
    distinctive values). Missing files count nothing."""
    total: Counter = Counter()
    for path in paths:
        if not path.exists():
            continue
        blob = path.read_bytes()
        total += count_in_text(blob.decode("utf-8", "replace"), needles) if text else count_in_bytes(blob, needles)
    return total
