"""The memory port (``activities.memory_port``) on SQLite and PostgreSQL: the memory tools as a
``ToolPort`` over the memory store and its ledger (``memory_writes``).

- a write applies once per idempotency key: a retry returns the recorded result (``replayed``)
  and changes nothing; the same key with other arguments is ``IdempotencyKeyConflict``;
  ``recorded`` finds it, and nothing under a key never used;
- the source conversation and turn come from the key, the words from the quote; results hold
  no remembered value;
- two conversations of the same customer remembering conflicting values at once (threads, one
  port each with its own clock): every write applies, the value confirmed last is kept;
- "forget everything" twice: both apply, the second removing nothing;
- a read scoped to another user is refused; a card number (in the value or the quote, beside an
  expiry too), a control character or a value too long is refused where it is written (nothing
  kept); erasure removes the customer's ledger rows with their facts.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta, timezone

import pytest

from activities.memory_port import MemoryPort
from activities.ports import PortError
from activities.store.memory import MemoryStore
from tests.journal_fixtures import either_database  # noqa: F401 (the ``url`` fixture)
from workflows.domain.contracts import Outcome
from workflows.domain.errors import ErrorType

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
USER = "chen_silva_7485"


def port(store: MemoryStore, at: datetime = T0) -> MemoryPort:
    return MemoryPort(store, lambda user_id: f"cust-{user_id}", lambda store_name: "acme", clock=lambda: at)


def remember(value: str, quote: str = "please remember that refunds go to my gift card") -> dict:
    return {"user_id": USER, "kind": "refund_method", "value": value, "complaint_order_id": "", "quote": quote}


def kept(store: MemoryStore) -> dict[str, str]:
    return {f.kind.value: f.value for f in store.facts("acme", f"cust-{USER}", T0 + timedelta(days=1))}


def test_a_write_applies_once_per_key_and_a_retry_changes_nothing(url):
    store = MemoryStore(url)
    key = f"remember_fact:{USER}:conv-1.t2"
    first = port(store).invoke("main", "remember_fact", remember("gift_card_1"), idempotency_key=key)
    assert first.outcome is Outcome.APPLIED and not first.replayed
    assert "gift_card_1" not in first.result and json.loads(first.result)["kept"] is True
    [fact] = store.facts("acme", f"cust-{USER}", T0)
    assert (fact.source.conversation_id, fact.source.turn, fact.source.words) == (
        "conv-1", 2, "please remember that refunds go to my gift card")
    again = port(store, T0 + timedelta(minutes=5)).invoke("main", "remember_fact", remember("gift_card_1"),
                                                          idempotency_key=key)
    assert again.replayed and again.result == first.result
    assert store.facts("acme", f"cust-{USER}", T0)[0].confirmed_at == T0  # the retry wrote nothing
    assert port(store).recorded("main", "remember_fact", remember("gift_card_1"), key).replayed
    assert port(store).recorded("main", "remember_fact", remember("gift_card_1"), f"{key}9") is None
    with pytest.raises(PortError) as conflict:
        port(store).invoke("main", "remember_fact", remember("credit_card_1"), idempotency_key=key)
    assert conflict.value.error_type is ErrorType.IDEMPOTENCY_KEY_CONFLICT
    assert kept(store) == {"refund_method": "gift_card_1"}
    store.dispose()


def test_two_conversations_remembering_conflicting_values_at_once_keep_the_last_confirmed(url):
    store = MemoryStore(url)
    results, errors = {}, []

    def write(index: int) -> None:
        try:
            value = f"gift_card_{index}"
            results[index] = port(store, T0 + timedelta(seconds=index)).invoke(
                "main", "remember_fact", remember(value), idempotency_key=f"remember_fact:{USER}:conv-{index}.t2")
        except Exception as err:  # noqa: BLE001 - collected for the assertion below
            errors.append(err)

    threads = [threading.Thread(target=write, args=(i,)) for i in reversed(range(8))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and all(r.outcome is Outcome.APPLIED for r in results.values())
    assert kept(store) == {"refund_method": "gift_card_7"}
    assert json.loads(results[7].result)["kept"] is True
    store.dispose()


def test_forgetting_everything_twice_applies_twice(url):
    store = MemoryStore(url)
    port(store).invoke("main", "remember_fact", remember("gift_card_1"), idempotency_key=f"remember_fact:{USER}:c.t2")
    forget = {"user_id": USER, "kind": "all"}
    first = port(store).invoke("main", "forget_fact", forget, idempotency_key=f"forget_fact:{USER}:c.t4")
    second = port(store).invoke("main", "forget_fact", forget, idempotency_key=f"forget_fact:{USER}:c.t6")
    assert (first.outcome, json.loads(first.result)) == (Outcome.APPLIED, {"forgotten": ["refund_method"]})
    assert (second.outcome, json.loads(second.result)) == (Outcome.APPLIED, {"forgotten": []})
    assert kept(store) == {}
    store.dispose()


def test_refusals_keep_nothing_and_erasure_removes_the_ledger(url):
    store = MemoryStore(url)
    memory = port(store)
    assert memory.invoke("main", "get_remembered_facts", {"user_id": USER}, scope_user_id="someone_else").outcome \
        is Outcome.REFUSED
    card = memory.invoke("main", "remember_fact", remember("4111 1111 1111 1111"),
                         idempotency_key=f"remember_fact:{USER}:c.t2")
    long = memory.invoke("main", "remember_fact", remember("x" * 300), idempotency_key=f"remember_fact:{USER}:c.t3")
    assert card.outcome is Outcome.REFUSED and "card numbers" in card.result
    assert long.outcome is Outcome.REFUSED and kept(store) == {}
    with pytest.raises(PortError):
        memory.invoke("main", "remember_fact", remember("gift_card_1"), idempotency_key="remember_fact:x:no-turn")
    memory.invoke("main", "remember_fact", remember("gift_card_1"), idempotency_key=f"remember_fact:{USER}:c.t4")
    read = json.loads(memory.invoke("main", "get_remembered_facts", {"user_id": USER}, scope_user_id=USER).result)
    assert [(f["kind"], f["value"], f["source"]["turn"]) for f in read["facts"]] == [
        ("refund_method", "gift_card_1", 4)]
    assert store.erase_customer(f"cust-{USER}") == 1
    assert memory.recorded("main", "remember_fact", remember("gift_card_1"), f"remember_fact:{USER}:c.t4") is None
    store.dispose()


# --- what the port refuses where it writes ----------------------------------------------------


def test_a_value_with_a_nul_is_refused_where_it_is_written_not_failed_at_the_database(url):
    # PostgreSQL cannot store a NUL: a database error would leave the confirmed write's outcome
    # unknown, where a refusal says what is wrong
    store = MemoryStore(url)
    memory = port(store)
    delivery = {**remember("leave it at the door\x00"), "kind": "delivery_instructions"}
    result = memory.invoke("main", "remember_fact", delivery, idempotency_key=f"remember_fact:{USER}:c.t2")
    assert result.outcome is Outcome.REFUSED, result
    assert kept(store) == {}
    store.dispose()


def test_a_card_number_in_the_quote_is_never_kept_in_the_facts_source(url):
    # the quote is kept as the fact's source for as long as the fact: an expiry after the card
    # number must not hide it
    store = MemoryStore(url)
    quote = "please remember that refunds go to my gift card, my card is 4111 1111 1111 1111 12/27"
    result = port(store).invoke("main", "remember_fact", remember("gift_card_1", quote),
                                idempotency_key=f"remember_fact:{USER}:c.t2")
    assert result.outcome is Outcome.REFUSED, result
    assert all("4111" not in f.source.words for f in store.facts("acme", f"cust-{USER}", T0))
    store.dispose()
