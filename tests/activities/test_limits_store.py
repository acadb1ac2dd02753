"""The limits kept in statekeeper's own database (``activities.store.limits``), on PostgreSQL
and SQLite: a key's request rate is one count however many processes (engines) and threads ask
at once; a tenant's open-conversation places are given exactly up to the limit under 100
simultaneous starts; finished conversations give theirs back; tokens today count only the
tenant's own calls of the current UTC day."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa

from activities.store.journal import JournalStore, ModelCallRecord
from activities.store.limits import RECONCILE_GRACE, KeyRates, TenantLedger, tenant_conversations
from activities.store.migrate import upgrade
from activities.store.tables import make_engine
from tests.journal_fixtures import either_database  # noqa: F401 (either_database: the url fixture)


@pytest.fixture
def engines(url: str):
    made = [make_engine(url) for _ in range(2)]  # two API processes on one database
    upgrade(made[0])
    yield made
    for engine in made:
        engine.dispose()


class StoppedClock:
    """A clock that does not move: the 60 requests of a burst come at one instant, however long
    the database takes to count them on a loaded machine."""

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def now(self) -> int:
        return self.ms


def test_a_key_gets_its_burst_then_a_wait_of_about_one_interval(engines):
    rates = KeyRates(engines[0])
    rates.clock = StoppedClock(1_796_556_646_834)
    assert [rates.admit("aaaaaaaaaaaa", 60) for _ in range(60)] == [None] * 60
    wait = rates.admit("aaaaaaaaaaaa", 60)
    assert wait is not None and 0.99 <= wait <= 1.01
    assert rates.admit("bbbbbbbbbbbb", 60) is None  # another key has its own count


def test_two_processes_and_many_threads_share_one_count(engines):
    first, second = KeyRates(engines[0]), KeyRates(engines[1])
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda i: (first if i % 2 else second).admit("cccccccccccc", 50), range(120)))
    # 50 at once, and at most one more refilled while the 120 were asked
    assert 50 <= sum(a is None for a in answers) <= 51
    assert all(a is None or a > 0 for a in answers)


def test_a_rate_below_one_is_refused(engines):
    with pytest.raises(ValueError):
        KeyRates(engines[0]).admit("dddddddddddd", 0)


def test_100_simultaneous_starts_get_exactly_the_limit(engines):
    ledgers = [TenantLedger(engines[0]), TenantLedger(engines[1])]
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda i: ledgers[i % 2].reserve("acme", f"c-{i}", 5), range(100)))
    assert sum(answers) == 5
    opened = ledgers[0].open_ids("acme")
    assert len(opened) == 5 and {f"c-{i}" for i, ok in enumerate(answers) if ok} == set(opened)
    assert ledgers[0].reserve("acme", opened[0], 5)  # a repeat of a counted start is no new place
    assert ledgers[0].reserve("other", "o-1", 5)  # another tenant has its own places
    assert ledgers[0].reserve("acme", "c-unlimited", None)  # no limit: always


def test_finished_conversations_give_their_places_back_after_the_grace(engines):
    ledger = TenantLedger(engines[0])
    assert ledger.reserve("acme", "c-1", 2) and ledger.reserve("acme", "c-2", 2)
    assert not ledger.reserve("acme", "c-3", 2)
    assert ledger.close_finished("acme", running=["c-1"]) == 0  # just reserved: its start may be on its way
    later = datetime.now(timezone.utc) + RECONCILE_GRACE + timedelta(seconds=1)
    assert ledger.close_finished("acme", running=["c-1"], now=later) == 1
    assert sorted(ledger.open_ids("acme")) == ["c-1"] and ledger.reserve("acme", "c-3", 2)
    ledger.release("c-3")
    assert ledger.open_ids("acme") == ["c-1"]


def test_tokens_today_count_the_tenants_own_calls_of_this_utc_day(url: str, engines):
    journal = JournalStore(url)
    ledger = TenantLedger(engines[0])
    now = datetime.now(timezone.utc)
    ledger.known("acme", "c-a")
    ledger.known("other", "c-o")
    ledger.known("acme", "c-a")  # again: kept as it is
    for cid, turn, at, tokens in (("c-a", 1, now, (100, 20, 5, 3)), ("c-a", 2, now, (10, 1, 0, 0)),
                                  ("c-a", 3, now - timedelta(days=1, hours=1), (999, 0, 0, 0)),
                                  ("c-o", 1, now, (500, 0, 0, 0)), ("c-unknown", 1, now, (700, 0, 0, 0))):
        journal.record_model_call(ModelCallRecord(
            conversation_id=cid, turn=turn, call_seq=1, prompt_version="p", model="m", view={}, recorded_at=at,
            input_tokens=tokens[0], output_tokens=tokens[1], cache_read_input_tokens=tokens[2],
            cache_creation_input_tokens=tokens[3]))
    assert ledger.tokens_today("acme", now) == 128 + 11
    assert ledger.tokens_today("other", now) == 500 and ledger.tokens_today("nobody", now) == 0
    with engines[0].connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(tenant_conversations)).scalar_one() == 2
    journal.close()


def test_a_start_tells_a_new_place_from_a_known_conversation_and_a_closed_one_keeps_its_row(engines):
    ledger = TenantLedger(engines[0])
    assert ledger.take("acme", "c-1", 1) is True and ledger.take("acme", "c-1", 1) is False
    assert ledger.take("acme", "c-2", 1) is None
    later = datetime.now(timezone.utc) + RECONCILE_GRACE + timedelta(seconds=1)
    assert ledger.close_finished("acme", running=[], now=later) == 1
    assert ledger.take("acme", "c-1", 1) is False  # a finished conversation's start: no new place
    ledger.release("c-1")  # its failed start gives back nothing: its row (and its tokens) stay
    with engines[0].connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(tenant_conversations)).scalar_one() == 1
