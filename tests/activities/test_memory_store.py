"""The memory store on SQLite and PostgreSQL (``activities.store.memory``): facts are kept per
tenant and customer, one per kind; the latest confirmation wins whatever order two writers
commit in (threads at once on PostgreSQL too); a retried write changes nothing; forgetting,
erasure and the retention purge remove exactly what they name."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

from activities.store.memory import MemoryStore
from tests.journal_fixtures import either_database  # noqa: F401 (the ``url`` fixture)
from workflows.domain.memory import FactKind, FactSource, MemoryFact, expiry, fact_id

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


def _fact(customer: str, kind: FactKind, value: str, at: datetime, conversation: str = "c1",
          tenant: str = "acme") -> MemoryFact:
    return MemoryFact(fact_id=fact_id(tenant, "main", customer, kind), kind=kind, value=value,
                      source=FactSource(conversation_id=conversation, turn=2, words=f"please remember {value}"),
                      learnt_at=at, confirmed_at=at, expires_at=expiry(kind, at))


def test_facts_are_kept_per_customer_and_tenant(url):
    store = MemoryStore(url)
    store.remember("acme", "main", "cust-a", _fact("cust-a", FactKind.REFUND_METHOD, "gift_card_1", T0))
    store.remember("acme", "main", "cust-a", _fact("cust-a", FactKind.PREFERRED_LANGUAGE, "Spanish", T0))
    store.remember("acme", "main", "cust-b", _fact("cust-b", FactKind.REFUND_METHOD, "gift_card_2", T0))
    store.remember("beta", "main", "cust-a", _fact("cust-a", FactKind.REFUND_METHOD, "gift_card_9", T0, tenant="beta"))
    mine = store.facts("acme", "cust-a", T0)
    assert [(f.kind, f.value) for f in mine] == [(FactKind.PREFERRED_LANGUAGE, "Spanish"),
                                                 (FactKind.REFUND_METHOD, "gift_card_1")]
    assert mine[1].source == FactSource(conversation_id="c1", turn=2, words="please remember gift_card_1")
    assert [f.value for f in store.facts("beta", "cust-a", T0)] == ["gift_card_9"]


def test_the_latest_confirmation_wins_and_a_retry_changes_nothing(url):
    store = MemoryStore(url)
    first = _fact("cust-a", FactKind.REFUND_METHOD, "gift_card_1", T0, "c1")
    later = _fact("cust-a", FactKind.REFUND_METHOD, "credit_card_2", T0 + timedelta(minutes=5), "c2")
    assert store.remember("acme", "main", "cust-a", later).value == "credit_card_2"
    assert store.remember("acme", "main", "cust-a", first).value == "credit_card_2"  # an older confirmation loses
    again = store.remember("acme", "main", "cust-a", later)
    assert (again.value, again.source.conversation_id, again.learnt_at) == ("credit_card_2", "c2", later.learnt_at)
    # confirming the same value again keeps when it was learnt and moves the expiry on
    reconfirmed = _fact("cust-a", FactKind.REFUND_METHOD, "credit_card_2", T0 + timedelta(days=3), "c3")
    kept = store.remember("acme", "main", "cust-a", reconfirmed)
    assert kept.learnt_at == later.learnt_at and kept.confirmed_at == reconfirmed.confirmed_at
    assert kept.expires_at == reconfirmed.expires_at


def test_two_conversations_confirming_at_once_keep_the_later_one(url):
    store = MemoryStore(url)
    facts = [_fact("cust-a", FactKind.DELIVERY_INSTRUCTIONS, f"ring bell {i}", T0 + timedelta(seconds=i), f"c{i}")
             for i in range(8)]
    threads = [threading.Thread(target=store.remember, args=("acme", "main", "cust-a", f)) for f in reversed(facts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [f.value for f in store.facts("acme", "cust-a", T0)] == ["ring bell 7"]


def test_forget_erase_and_purge_remove_what_they_name(url):
    store = MemoryStore(url)
    lang = _fact("cust-a", FactKind.PREFERRED_LANGUAGE, "Spanish", T0)
    store.remember("acme", "main", "cust-a", lang)
    store.remember("acme", "main", "cust-a", _fact("cust-a", FactKind.OPEN_COMPLAINT, "broken lamp", T0))
    store.remember("acme", "main", "cust-b", _fact("cust-b", FactKind.PREFERRED_LANGUAGE, "French", T0))
    assert not store.forget("acme", "cust-b", lang.fact_id)  # another customer's id: nothing
    assert store.forget("acme", "cust-a", lang.fact_id) and not store.forget("acme", "cust-a", lang.fact_id)
    # the complaint (90 days) expires before the language (730): the purge removes it only once expired
    assert store.purge_expired(T0 + timedelta(days=89)) == 0
    assert store.purge_expired(T0 + timedelta(days=91)) == 1
    assert store.facts("acme", "cust-a", T0) == []
    store.remember("acme", "main", "cust-a", lang)
    assert store.forget_all("acme", "cust-a") == 1 and store.forget_all("acme", "cust-a") == 0
    assert store.erase_customer("cust-b") == 1 and store.facts("acme", "cust-b", T0) == []


def test_an_expired_fact_is_never_read(url):
    store = MemoryStore(url)
    fact = _fact("cust-a", FactKind.OPEN_COMPLAINT, "broken lamp", T0)
    store.remember("acme", "main", "cust-a", fact)
    assert store.facts("acme", "cust-a", fact.expires_at - timedelta(seconds=1))
    assert store.facts("acme", "cust-a", fact.expires_at) == []
