"""``statekeeper dev``'s state and the system of record it serves, pure apart from stand-in
processes:

- the system-of-record fingerprint a worker's identity carries, the absolute data directory,
  and how a command adopts the detached dev server's settings (``starter.dev.state``);
- ``starter.dev.server_owner.orphan``: a record stops only the embedded server it names, never
  another live ``start-dev`` process at the recorded pid (another statekeeper's embedded server,
  with another data directory and address). Real processes stand in for servers (never
  signalled).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from settings import Settings
from starter.dev import state as devstate, server_owner
from starter.runtime.system_of_record import (
    database_identity, fingerprint, fingerprint_in_identity, worker_identity,
)


# --- System of record and dev state ---

PG = "postgresql+psycopg://shop:s3cret-pw@db.internal:5432/retail"


def test_the_fingerprint_holds_neither_the_url_nor_the_password():
    value = fingerprint(PG)
    assert len(value) == 16 and int(value, 16) >= 0
    identity = worker_identity(value)
    assert "s3cret" not in identity and "db.internal" not in identity and "retail" not in identity
    assert "s3cret" not in database_identity(PG)


def test_one_database_one_fingerprint_whatever_the_password_or_driver():
    assert fingerprint(PG) == fingerprint("postgresql://shop:rotated@db.internal:5432/retail")
    assert fingerprint(PG) != fingerprint("postgresql+psycopg://shop:s3cret-pw@db.internal:5432/retail_copy")
    assert fingerprint(PG) != fingerprint("postgresql+psycopg://shop:s3cret-pw@db2.internal:5432/retail")


def test_a_relative_sqlite_path_is_the_file_it_opens(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    absolute = f"sqlite:///{tmp_path / 'sk.sqlite'}"
    assert fingerprint("sqlite:///sk.sqlite") == fingerprint(absolute)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert fingerprint("sqlite:///sk.sqlite") != fingerprint(absolute)  # another directory, another file
    assert socket.gethostname() in database_identity(absolute)  # the same path on two hosts: two databases


def test_an_in_memory_database_is_private_to_its_process():
    assert str(os.getpid()) in database_identity("sqlite://")
    assert fingerprint("sqlite://") == fingerprint("sqlite:///:memory:")


def test_the_identity_gives_back_its_fingerprint_and_others_give_none():
    value = fingerprint(PG)
    assert fingerprint_in_identity(worker_identity(value)) == value
    assert fingerprint_in_identity(f"{os.getpid()}@host") is None  # the SDK's default identity
    assert fingerprint_in_identity("sor:not-hex-at-all") is None


def test_the_data_dir_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert Settings(data_dir=Path("data")).data_dir == tmp_path.resolve() / "data"
    assert Settings(data_dir=Path("data")).resolved_database_url() == f"sqlite:///{tmp_path.resolve()}/data/statekeeper.sqlite"


def _recorded(tmp_path: Path, pid: int, **given) -> Settings:
    dev = Settings(data_dir=tmp_path / "dev-data", temporal_address="127.0.0.1:17999", ui_port=18999,
                   task_queue="dev-queue", dev_state_file=tmp_path / "dev.json")
    devstate.write(dev, devstate.describe(dev, pid))
    return Settings(dev_state_file=tmp_path / "dev.json", **given)


def test_a_command_adopts_the_running_dev_servers_data_dir_and_queue(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    adopted = devstate.adopt(_recorded(tmp_path, os.getpid(), temporal_address="127.0.0.1:17999"))
    assert adopted.data_dir == tmp_path / "dev-data"
    assert (adopted.task_queue, adopted.ui_port) == ("dev-queue", 18999)
    assert fingerprint(adopted.resolved_database_url()) == devstate.read(adopted).db_fingerprint


def test_given_settings_win_over_the_record(tmp_path):
    given = _recorded(tmp_path, os.getpid(), temporal_address="127.0.0.1:17999", data_dir=tmp_path / "mine",
                      task_queue="mine")
    adopted = devstate.adopt(given)
    assert (adopted.data_dir, adopted.task_queue, adopted.ui_port) == (tmp_path / "mine", "mine", 18999)
    with_url = _recorded(tmp_path, os.getpid(), temporal_address="127.0.0.1:17999",
                         database_url=f"sqlite:///{tmp_path / 'x.sqlite'}")
    assert devstate.adopt(with_url).data_dir == with_url.data_dir


def test_no_adoption_for_another_address_or_a_dead_process(tmp_path):
    other = _recorded(tmp_path, os.getpid(), temporal_address="127.0.0.1:17998")
    assert devstate.adopt(other) == other
    dead = _recorded(tmp_path, 2 ** 22 + 12345, temporal_address="127.0.0.1:17999")  # above Linux's pid_max
    assert devstate.read(dead) is None and devstate.adopt(dead) == dead
    devstate.remove(dead, os.getpid())  # not its record: stays
    assert devstate.state_file(dead).exists()
    devstate.remove(dead, 2 ** 22 + 12345)
    assert not devstate.state_file(dead).exists()


def test_the_services_fingerprint_names_which_services_and_hides_where():
    from starter.runtime.system_of_record import services_difference, services_fingerprint, services_in_identity

    full = {"payments": "http://pay.internal:8001/", "email": "http://mail:8002", "ticketing": "http://t:8003"}
    value = services_fingerprint(full)
    assert value.startswith("pet") and len(value) == 15
    assert services_fingerprint({**full, "payments": "HTTP://user:pw@PAY.internal:8001"}) == value  # same service
    assert services_fingerprint({**full, "payments": "http://pay.internal:9001"}) != value
    without = services_fingerprint({**full, "payments": None})
    assert without.startswith("-et")
    identity = worker_identity(fingerprint(PG), value)
    assert services_in_identity(identity) == value and fingerprint_in_identity(identity) == fingerprint(PG)
    assert "pay.internal" not in identity and services_in_identity(worker_identity(fingerprint(PG))) is None
    assert "that worker uses a payments service and this one has none" in services_difference(value, without)
    assert "this worker uses a payments service" in services_difference(without, value)
    no_email = services_fingerprint({**full, "email": None})
    assert "that worker uses an email service" in services_difference(value, no_email)  # not "a email"
    assert services_difference(value, services_fingerprint({**full, "email": "http://m2"})) == (
        "both use the same services at different URLs")


# --- The embedded server a record owns ---

DEAD = 2 ** 22 + 1  # above pid_max's default ceiling: never a live process


@pytest.fixture
def stand_in():
    """A live process whose command line reads like an embedded server at 127.0.0.1:50001."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                             "server", "start-dev", "--ip", "127.0.0.1", "--port", "50001"])
    yield proc
    proc.kill()
    proc.wait()


def _write(tmp_path, **record):
    (tmp_path / server_owner.RECORD).write_text(json.dumps(record))


def test_the_recorded_server_at_its_address_is_an_orphan(tmp_path, stand_in):
    _write(tmp_path, server_pid=stand_in.pid, owner_pid=DEAD, address="127.0.0.1:50001",
           server_started=server_owner.started(stand_in.pid))
    assert server_owner.orphan(tmp_path, "127.0.0.1:50001") == stand_in.pid


def test_a_server_at_another_address_is_not_ours(tmp_path, stand_in):
    _write(tmp_path, server_pid=stand_in.pid, owner_pid=DEAD, address="127.0.0.1:50002")
    assert server_owner.orphan(tmp_path, "127.0.0.1:50002") is None
    assert not server_owner.stop_orphan(tmp_path, "127.0.0.1:50002")
    assert stand_in.poll() is None


def test_a_reused_pid_is_not_the_recorded_server(tmp_path, stand_in):
    _write(tmp_path, server_pid=stand_in.pid, owner_pid=DEAD, address="127.0.0.1:50001",
           server_started=server_owner.started(stand_in.pid) - 1)
    assert server_owner.orphan(tmp_path, "127.0.0.1:50001") is None


@pytest.mark.parametrize("text", ["garbage{", "[]", '{"server_pid": "1", "owner_pid": null}', ""])
def test_an_unreadable_record_names_nothing(tmp_path, text):
    (tmp_path / server_owner.RECORD).write_text(text)
    assert server_owner.orphan(tmp_path, "127.0.0.1:50001") is None


def test_a_reused_owner_pid_does_not_hide_the_orphan(tmp_path, stand_in):
    unrelated = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _write(tmp_path, server_pid=stand_in.pid, owner_pid=unrelated.pid, address="127.0.0.1:50001",
               server_started=server_owner.started(stand_in.pid),
               owner_started=server_owner.started(unrelated.pid) - 1)
        assert server_owner.orphan(tmp_path, "127.0.0.1:50001") == stand_in.pid
        _write(tmp_path, server_pid=stand_in.pid, owner_pid=unrelated.pid, address="127.0.0.1:50001",
               owner_started=server_owner.started(unrelated.pid))
        assert server_owner.orphan(tmp_path, "127.0.0.1:50001") is None  # its owner runs
    finally:
        unrelated.kill()
        unrelated.wait()
