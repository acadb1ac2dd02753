"""The audit log (``activities.store.audit``) on real SQLite and PostgreSQL: appended rows come back in order with their actor,
action, subject and a UTC time; filters select; the table is append-only; details are bounded."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from activities.store.audit import MAX_DETAIL, AuditLog
from tests.journal_fixtures import postgres_database


@pytest.fixture(params=["sqlite", "postgresql"])
def log(request, tmp_path):
    if request.param == "sqlite":
        audit = AuditLog(f"sqlite:///{tmp_path / 'a.sqlite'}")
        yield audit
        audit.close()
        return
    with postgres_database() as url:
        audit = AuditLog(url)
        yield audit
        audit.close()


def test_records_and_filters(log):
    before = datetime.now(timezone.utc)
    log.record("key-a", "read_state", "conv-1")
    log.record("key-b", "read_transcript", "conv-1", "format=text")
    log.record("key-a", "list_by_customer", "cust-pseudonym", "items=2")
    every = log.entries()
    assert [(e.actor, e.action, e.subject) for e in every] == [
        ("key-a", "read_state", "conv-1"), ("key-b", "read_transcript", "conv-1"),
        ("key-a", "list_by_customer", "cust-pseudonym")]
    assert every[1].detail == "format=text" and every[0].detail == ""
    assert all(before - timedelta(seconds=1) <= e.at <= datetime.now(timezone.utc) for e in every)
    assert all(e.at.tzinfo is not None for e in every)
    assert [e.action for e in log.entries(subject="conv-1")] == ["read_state", "read_transcript"]
    assert [e.subject for e in log.entries(actor="key-a")] == ["conv-1", "cust-pseudonym"]
    assert [e.actor for e in log.entries(subject="conv-1", actor="key-b")] == ["key-b"]
    assert log.entries(subject="nobody") == []


def test_survives_reopening_and_bounds_detail(tmp_path):
    url = f"sqlite:///{tmp_path / 'a.sqlite'}"
    AuditLog(url).record("cli", "erase_customer", "c1", "x" * (MAX_DETAIL + 50))
    again = AuditLog(url)
    (entry,) = again.entries()
    assert entry.subject == "c1" and len(entry.detail) == MAX_DETAIL


def test_has_no_update_or_delete():
    # append-only by construction: the class offers no way to change or drop an entry
    public = {name for name in vars(AuditLog) if not name.startswith("_")}
    assert public == {"record", "entries", "close"}
