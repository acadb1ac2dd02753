"""Data files are created 0600 without disturbing SQLite: the system of
record's and the journal's SQLite files, their WAL files, and a file made world-readable by
an older version; several engines on one file in one process (the journal, the audit log,
the key store share the journal database) keep working."""

from __future__ import annotations

import stat
import subprocess
import sys

import sqlalchemy as sa

from activities.store.tables import make_engine as journal_engine
from systems.retail.engine import make_engine


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_sqlite_files_are_created_0600_and_a_wider_one_is_narrowed(tmp_path):
    url = f"sqlite:///{tmp_path / 'sor.sqlite'}"
    with make_engine(url).begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (a INTEGER)")
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["sor.sqlite", "sor.sqlite-shm", "sor.sqlite-wal"]
    assert [_mode(tmp_path / f) for f in files] == [0o600] * 3
    old = tmp_path / "journal.sqlite"  # left world-readable by an older version
    old.touch(mode=0o644)
    old.chmod(0o644)
    with journal_engine(f"sqlite:///{old}").begin() as conn:
        conn.exec_driver_sql("CREATE TABLE j (a INTEGER)")
    assert _mode(old) == 0o600 and _mode(tmp_path / "journal.sqlite-wal") == 0o600


def test_opening_another_engine_keeps_this_process_locks_on_the_file(tmp_path):
    """Closing any descriptor of a SQLite file drops every POSIX lock this process holds on
    it. Opening the file (to create it 0600) on every engine while the journal, the audit log
    and the key store have it open would let another process see no reader, checkpoint and
    delete the WAL under them (`statekeeper dev`'s audit log then fails with "disk I/O error").
    A live process's WAL survives another's visit."""
    path = tmp_path / "journal.sqlite"
    url = f"sqlite:///{path}"
    first = journal_engine(url)
    with first.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (a INTEGER)")
        conn.exec_driver_sql("INSERT INTO t VALUES (1)")
    journal_engine(url), make_engine(url)  # the audit log, the key store... on the same file
    visit = ("import sqlite3; c = sqlite3.connect(%r); c.execute('SELECT count(*) FROM t').fetchall(); c.close()"
             % str(path))
    subprocess.run([sys.executable, "-c", visit], check=True, timeout=30)
    assert (tmp_path / "journal.sqlite-wal").exists()  # still ours: the visitor was not the last
    with first.begin() as conn:
        conn.exec_driver_sql("INSERT INTO t VALUES (2)")
    with first.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM t").scalar() == 2
    assert sa.inspect(first).get_table_names() == ["t"]
