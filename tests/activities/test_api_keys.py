"""API keys (``activities.store.api_keys``) on real SQLite and PostgreSQL: a key verifies only whole and
under the server secret it was made with, is stored as an HMAC digest (never the key),
stops working the moment it is revoked (also when found by its id, as a signed-in browser's
session finds it); bad tenants and scopes are refused; and the server
secret file is made once, 0600."""

from __future__ import annotations

import hashlib
import hmac
import os
import threading

import pytest
import sqlalchemy as sa

from settings import Settings
from activities.store.api_keys import ApiKey, KeyStore, Role
from tests.journal_fixtures import postgres_database

SECRET = "server-secret-for-tests"


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'keys.sqlite'}"
        return
    with postgres_database() as database:
        yield database


def _rows(store: KeyStore) -> list[dict]:
    with store.engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.text("SELECT * FROM api_keys")).mappings()]


def test_a_key_verifies_whole_and_is_stored_as_a_digest(url):
    store = KeyStore(url, SECRET)
    record, key = store.create("acme", Role.SERVICE, label="checkout")
    assert isinstance(record, ApiKey) and record.active and record.tenant == "acme" and record.role is Role.SERVICE
    found = store.verify(key)
    assert found is not None and found.key_id == record.key_id and found.label == "checkout"
    assert found.created_at.tzinfo is not None
    key_id, secret = key[3:15], key[16:]
    [row] = _rows(store)
    assert row["key_id"] == key_id and secret not in " ".join(str(v) for v in row.values())
    assert row["digest"] == hmac.new(SECRET.encode(), f"{key_id}:{secret}".encode(), hashlib.sha256).hexdigest()
    wrong = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    for presented in (f"sk_{key_id}_{wrong}", key[:-1], key + "A", key.upper(), f"sk_{'0' * 12}_{secret}",
                      "", "Bearer " + key, f"sk_{key_id}_{secret}\n"):
        assert store.verify(presented) is None, presented
    # the database alone is not enough: under another server secret the same key fails
    assert KeyStore(url, "another-secret").verify(key) is None
    store.close()


def test_revoked_at_once_and_listed_only_on_request(url):
    store = KeyStore(url, SECRET)
    first, key = store.create("default", Role.OPERATOR)
    second, other = store.create("default", Role.SERVICE, customer="cust-00ff")
    assert store.active_count() == 2 and [k.key_id for k in store.keys()] == [first.key_id, second.key_id]
    assert store.revoke(first.key_id) is True
    assert store.verify(key) is None and store.verify(other) is not None
    assert store.revoke(first.key_id) is False and store.revoke("nope") is False
    assert [k.key_id for k in store.keys()] == [second.key_id] and store.active_count() == 1
    revoked = {k.key_id: k for k in store.keys(include_revoked=True)}[first.key_id]
    assert not revoked.active and revoked.revoked_at is not None and revoked.revoked_at.tzinfo is not None
    assert store.verify(other).customer == "cust-00ff"


def test_a_key_is_found_by_its_id_only_while_active_and_secrets_derive_per_purpose(url):
    store = KeyStore(url, SECRET)
    record, _ = store.create("acme", Role.OPERATOR)
    assert store.active_key(record.key_id) == record
    assert store.active_key("0" * 12) is None
    assert store.revoke(record.key_id) and store.active_key(record.key_id) is None
    # a browser session's signing secret (starter.api.inbox.sessions): one per purpose and server secret
    session = store.derived_secret("inbox-session")
    assert session == KeyStore(url, SECRET).derived_secret("inbox-session") and len(session) == 32
    assert len({session, store.derived_secret("other"), KeyStore(url, SECRET + "x").derived_secret("inbox-session")}) == 3
    assert SECRET.encode() not in session


def test_bad_keys_are_refused_and_nothing_is_stored(url):
    store = KeyStore(url, SECRET)
    for tenant, role, customer, reason in (("Acme", Role.SERVICE, None, "tenant"), ("", Role.SERVICE, None, "tenant"),
                                           ("acme", Role.OPERATOR, "cust-1", "only a service key"),
                                           ("acme", "admin", None, "admin")):
        with pytest.raises(ValueError, match=reason):
            store.create(tenant, role, customer=customer)
    assert _rows(store) == [] and store.active_count() == 0
    with pytest.raises(ValueError, match="empty"):
        KeyStore(url, "")


def test_the_server_secret_is_made_once_0600_and_the_setting_wins(tmp_path):
    settings = Settings(data_dir=tmp_path)
    assert settings.api_key_hmac_secret(create=False) is None
    made = []
    threads = [threading.Thread(target=lambda: made.append(settings.api_key_hmac_secret())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(made)) == 1 and len(made[0]) == 64  # every racer reads the one secret, never an empty one
    path = tmp_path / "api-key.secret"
    assert oct(path.stat().st_mode & 0o777) == "0o600" and path.read_text().strip() == made[0]
    assert [p.name for p in tmp_path.iterdir()] == ["api-key.secret"]  # no temporary file left behind
    assert Settings(data_dir=tmp_path, api_key_secret="from-env").api_key_hmac_secret() == "from-env"
    assert os.stat(path).st_size > 0


def test_a_key_keeps_its_own_request_rate_and_a_key_made_before_rates_has_the_default(url):
    from activities.store import migrate
    from activities.store.tables import make_engine

    engine = make_engine(url)
    migrate.upgrade(engine, "0003")  # the database as the release before per-key rates left it
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO api_keys (key_id, digest, tenant, role, label, created_at) VALUES "
                             "('0123456789ab', :d, 'acme', 'service', '', CURRENT_TIMESTAMP)"),
                     {"d": hmac.new(SECRET.encode(), f"0123456789ab:{'A' * 43}".encode(), hashlib.sha256).hexdigest()})
    migrate._done.discard(url)
    store = KeyStore(url, SECRET)
    try:
        old = store.verify("sk_0123456789ab_" + "A" * 43)
        assert old is not None and old.requests_per_minute is None  # the API's default applies
        record, key = store.create("acme", Role.SERVICE, requests_per_minute=120)
        assert record.requests_per_minute == 120 and store.verify(key).requests_per_minute == 120
        for bad in (0, -5, 1_000_001):
            with pytest.raises(ValueError, match="requests a minute"):
                store.create("acme", Role.SERVICE, requests_per_minute=bad)
        assert len(store.keys()) == 2
    finally:
        store.close()
        engine.dispose()
