"""``starter.dev.server_owner.orphan``: a record stops only the embedded server it names. Before, any
live ``start-dev`` process at the recorded pid counted, and `statekeeper stop` with a record whose
server pid was another statekeeper's live embedded server (another data directory, another
address) killed it (a helper's finding). Real processes stand in for servers (never signalled)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from starter.dev import server_owner

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
