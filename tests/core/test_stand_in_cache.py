"""The offline stand-in's prompt cache follows the provider's caching rules: hits and misses by
exact prefix, a 5-minute lifetime refreshed by hits, at most 4 breakpoints (a 400 otherwise),
no caching below the minimum length, lookback over appended blocks, and usage that adds up."""

from __future__ import annotations

import anthropic
import pytest

from activities.llm.model_activity import offline_client
from systems.model.cache import CacheRuleError, PromptCache, tokens_of

EPHEMERAL = {"type": "ephemeral"}
SYSTEM = "s" * 8000  # 2,000 tokens: above the 1,024-token minimum


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def body(*user_blocks: str, marks: tuple[int, ...] = (), system_mark: bool = True, system: str = SYSTEM) -> dict:
    content = [{"type": "text", "text": text, **({"cache_control": EPHEMERAL} if i in marks else {})}
               for i, text in enumerate(user_blocks)]
    return {"model": "m", "max_tokens": 10,
            "system": [{"type": "text", "text": system, **({"cache_control": EPHEMERAL} if system_mark else {})}],
            "messages": [{"role": "user", "content": content}]}


def total(usage: dict) -> int:
    return usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]


def test_first_call_writes_the_next_reads_and_a_changed_prefix_misses():
    cache = PromptCache(clock=Clock())
    first = cache.account(body("stable " * 100, "volatile 1", marks=(0,)))
    assert first["cache_read_input_tokens"] == 0 and first["cache_creation_input_tokens"] > 2000
    second = cache.account(body("stable " * 100, "volatile 2", marks=(0,)))
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert second["cache_creation_input_tokens"] == 0 and second["input_tokens"] == tokens_of(
        len(SYSTEM) + 700 + len("volatile 2")) - second["cache_read_input_tokens"]
    # a changed stable block: the system prefix still hits, the stable block is written again
    third = cache.account(body("changed " * 100, "volatile 3", marks=(0,)))
    assert third["cache_read_input_tokens"] == tokens_of(len(SYSTEM))
    assert third["cache_creation_input_tokens"] == tokens_of(len(SYSTEM) + 800) - tokens_of(len(SYSTEM))
    for usage in (first, second, third):
        assert usage["input_tokens"] > 0


def test_an_entry_expires_five_minutes_after_its_last_use():
    clock = Clock()
    cache = PromptCache(clock=clock)
    cache.account(body("v"))
    clock.now += 299
    assert cache.account(body("v"))["cache_read_input_tokens"] > 0  # a hit refreshes the lifetime
    clock.now += 299
    assert cache.account(body("v"))["cache_read_input_tokens"] > 0
    clock.now += 301
    missed = cache.account(body("v"))
    assert missed["cache_read_input_tokens"] == 0 and missed["cache_creation_input_tokens"] > 0


def test_a_prefix_below_the_minimum_is_not_cached():
    cache = PromptCache(clock=Clock())
    short = body("tiny", system="short system")
    for _ in range(2):
        usage = cache.account(short)
        assert usage["cache_read_input_tokens"] == usage["cache_creation_input_tokens"] == 0
        assert usage["input_tokens"] == total(usage) > 0


def test_an_appended_block_still_hits_the_prefix_written_before_it():
    cache = PromptCache(clock=Clock())
    cache.account(body("a" * 400, marks=(0,)))
    grown = cache.account(body("a" * 400, "b" * 400, marks=(1,)))  # the old breakpoint is gone
    assert grown["cache_read_input_tokens"] == tokens_of(len(SYSTEM) + 400)
    assert grown["cache_creation_input_tokens"] == tokens_of(len(SYSTEM) + 800) - tokens_of(len(SYSTEM) + 400)


def test_more_than_four_breakpoints_is_refused():
    cache = PromptCache(clock=Clock())
    four = body("1", "2", "3", marks=(0, 1, 2))
    assert total(cache.account(four)) > 0
    with pytest.raises(CacheRuleError, match="maximum of 4 blocks with cache_control"):
        cache.account(body("1", "2", "3", "4", marks=(0, 1, 2, 3)))


async def test_the_stand_in_answers_400_to_five_breakpoints_and_reports_cache_usage():
    client = offline_client(10.0)
    content = [{"type": "text", "text": f"block {i}", "cache_control": EPHEMERAL} for i in range(4)]
    content.append({"type": "text", "text": '<state_json>{"turn": 1}</state_json>'})
    request = {"model": "m", "max_tokens": 100, "system": [{"type": "text", "text": SYSTEM, "cache_control": EPHEMERAL}],
               "messages": [{"role": "user", "content": content}]}
    with pytest.raises(anthropic.BadRequestError, match="maximum of 4 blocks with cache_control"):
        await client.messages.create(**request)
    request["messages"][0]["content"] = content[3:]  # one breakpoint in the message: two in all
    first = await client.messages.create(**request)
    second = await client.messages.create(**request)
    assert first.usage.cache_creation_input_tokens > 0 and first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.cache_creation_input_tokens == 0
    counted = await client.messages.count_tokens(model="m", system=request["system"], messages=request["messages"])
    assert counted.input_tokens == (second.usage.input_tokens + second.usage.cache_read_input_tokens
                                    + second.usage.cache_creation_input_tokens)
