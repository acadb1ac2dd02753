"""The stand-in's model of the provider's prompt cache, so offline usage figures are a
faithful model of the bill. **The figures are modelled, not measured**: tokens are
approximated as characters / 4 (``wire.approx_tokens``), and the rules are those the
Messages API documents for prompt caching:

- a request is read as tools → system → messages, each a list of blocks (a tool, a system
  text block, a message's content block; a string is one block);
- a block with ``cache_control`` is a breakpoint; at most ``MAX_BREAKPOINTS`` (4) per
  request, more is a 400 ``invalid_request_error``;
- a breakpoint caches the exact prefix up to and including its block (keyed by the model and
  that prefix's content), if the prefix holds at least ``min_tokens`` (1024 for Sonnet-class
  models; shorter prefixes are silently not cached); an entry lives ``ttl_seconds`` (5
  minutes) after it was last written or read;
- a lookup at a breakpoint also finds an entry written at any of the ``LOOKBACK_BLOCKS`` (20)
  block boundaries before it, so an append-only prefix keeps hitting as it grows;
- usage: ``cache_read_input_tokens`` = the longest prefix found, ``cache_creation_input_tokens``
  = the tokens after it up to the last breakpoint written, ``input_tokens`` = the uncached rest.

One ``PromptCache`` serves every request of one stand-in app (``server.offline_app``): it is
shared by all conversations, as the provider's cache is shared by an organisation's requests.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
DEFAULT_MIN_TOKENS = 1024
DEFAULT_TTL_SECONDS = 300.0
MAX_ENTRIES = 100_000
"""Bound of the stand-in's memory; the least recently used entries go first."""


class CacheRuleError(ValueError):
    """The request breaks a caching rule the API enforces (more than 4 breakpoints)."""


@dataclass(frozen=True)
class Block:
    """One block of a request in reading order: its text and whether it is a breakpoint."""

    text: str
    breakpoint: bool


def _marked(block: Any) -> bool:
    return isinstance(block, dict) and isinstance(block.get("cache_control"), dict)


def _text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
        return block["text"]
    unmarked = {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block
    return json.dumps(unmarked, sort_keys=True, separators=(",", ":"))  # layout whitespace is not content


def request_blocks(body: dict[str, Any]) -> list[Block]:
    """The blocks of a (checked) request body in the provider's reading order."""
    blocks = [Block(_text(t), _marked(t)) for t in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, str) and system:
        blocks.append(Block(system, False))
    elif isinstance(system, list):
        blocks.extend(Block(_text(b), _marked(b)) for b in system)
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            blocks.extend(Block(_text(b), _marked(b)) for b in content)
        else:
            blocks.append(Block(_text(content or ""), False))
    return blocks


def tokens_of(chars: int) -> int:
    """The documented approximation: one token per four characters (rounded up)."""
    return math.ceil(chars / 4)


class PromptCache:
    """The prefix cache of one stand-in. ``clock`` returns seconds (monotonic by default;
    tests pass a fake). Thread-safe."""

    def __init__(self, min_tokens: int = DEFAULT_MIN_TOKENS, ttl_seconds: float = DEFAULT_TTL_SECONDS,
                 clock: Callable[[], float] = time.monotonic, max_entries: int = MAX_ENTRIES) -> None:
        self.min_tokens = min_tokens
        self.ttl_seconds = ttl_seconds
        self.clock = clock
        self.max_entries = max_entries
        self._expiry: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def _alive(self, key: str, now: float) -> bool:
        expiry = self._expiry.get(key)
        if expiry is None:
            return False
        if expiry <= now:
            del self._expiry[key]
            return False
        return True

    def _store(self, key: str, now: float) -> None:
        self._expiry[key] = now + self.ttl_seconds
        self._expiry.move_to_end(key)
        while len(self._expiry) > self.max_entries:
            self._expiry.popitem(last=False)

    def account(self, body: dict[str, Any]) -> dict[str, int]:
        """Look the request up, write its breakpoints, and return its input usage:
        ``{"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"}`` (their
        sum is the whole prompt's approximate tokens). Raises ``CacheRuleError``."""
        blocks = request_blocks(body)
        marks = [i for i, b in enumerate(blocks) if b.breakpoint]
        if len(marks) > MAX_BREAKPOINTS:
            raise CacheRuleError(f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                                 f"Found {len(marks)}.")
        digest = hashlib.sha256(str(body.get("model", "")).encode())
        keys, tokens, chars = [], [], 0
        for block in blocks:
            digest.update(len(block.text).to_bytes(8, "big"))
            digest.update(block.text.encode())
            keys.append(digest.hexdigest())
            chars += len(block.text)
            tokens.append(tokens_of(chars))
        total = tokens[-1] if tokens else 0
        with self._lock:
            now = self.clock()
            read_at = -1
            for mark in marks:
                for i in range(mark, max(-1, mark - LOOKBACK_BLOCKS - 1), -1):
                    if i > read_at and self._alive(keys[i], now):
                        read_at = i
                        break
            if read_at >= 0:
                self._store(keys[read_at], now)  # a hit refreshes the entry's lifetime
            read = tokens[read_at] if read_at >= 0 else 0
            written = read
            for mark in marks:
                if mark > read_at and tokens[mark] >= self.min_tokens:
                    self._store(keys[mark], now)
                    written = tokens[mark]
        return {"input_tokens": total - written, "cache_creation_input_tokens": written - read,
                "cache_read_input_tokens": read}
