"""The moving parts of ``bench/chaos.py``: PostgreSQL databases made for one run, a Temporal
dev server that keeps its state in a SQLite file across restarts, and a pool of worker
processes (``python worker.py``) that are SIGKILLed and started again.

Everything here is started by the bench and stopped by it (its own process ids only).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Optional

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[2]
POSTGRES = os.environ.get("STATEKEEPER_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
DATABASES = ("sor", "payments", "email", "ticketing")
"""One database each: the retail system of record (with the journal and the model's plans)
and the three external services."""


class Databases:
    """``Databases(run_id)``: ``create()`` makes ``chaos_<run>_<name>`` for each of
    ``DATABASES`` on the server of ``STATEKEEPER_TEST_POSTGRES_URL`` and returns
    {name: SQLAlchemy URL}; ``drop()`` removes them (``WITH (FORCE)``: stray sessions too)."""

    def __init__(self, run_id: str, server_url: str = POSTGRES) -> None:
        self.server_url = server_url
        self.names = {name: f"chaos_{run_id}_{name}" for name in DATABASES}
        self.urls: dict[str, str] = {}

    def _admin(self) -> sa.Engine:
        return sa.create_engine(self.server_url, isolation_level="AUTOCOMMIT")

    def create(self) -> dict[str, str]:
        engine = self._admin()
        try:
            with engine.connect() as conn:
                for name, db in self.names.items():
                    conn.execute(sa.text(f'CREATE DATABASE "{db}"'))
                    self.urls[name] = self.server_url.rsplit("/", 1)[0] + "/" + db
        finally:
            engine.dispose()
        return self.urls

    def drop(self) -> None:
        engine = self._admin()
        try:
            with engine.connect() as conn:
                for db in self.names.values():
                    conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        finally:
            engine.dispose()


class TemporalServer:
    """``TemporalServer(tmp)``: the embedded dev server (``starter.dev.server``) on free ports
    with its history in ``tmp/temporal.sqlite``; ``restart()`` SIGKILLs it and starts it
    again on the same port and file (the state survives: WAL, committed transactions are
    on disk when the process dies)."""

    def __init__(self, tmp: Path) -> None:
        from settings import Settings  # noqa: PLC0415
        from systems.service_kit.server import free_port  # noqa: PLC0415

        self.tmp = tmp
        self.settings = Settings(temporal_address=f"127.0.0.1:{free_port()}", ui_port=free_port(), data_dir=tmp,
                                 codec_keys=os.environ["STATEKEEPER_CODEC_KEYS"], anthropic_api_key=None)
        self.proc: Optional[subprocess.Popen] = None
        self.restarts = 0

    @property
    def address(self) -> str:
        return self.settings.temporal_address

    async def start(self, timeout: float = 90.0) -> None:
        """Start the server and wait until it serves; raises ``DevServerError`` otherwise."""
        from starter.dev.server import dev_server_command, private_log, wait_until_serving  # noqa: PLC0415

        log_path = self.tmp / "temporal-server.log"
        command = dev_server_command(self.settings, self.tmp / "temporal.sqlite")
        with private_log(log_path) as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        await wait_until_serving(self.settings, self.proc, log_path, timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait(10)

    async def restart(self, down_seconds: float = 1.0) -> None:
        """SIGKILL the server, stay down ``down_seconds``, start it again on the same file."""
        self.kill()
        await asyncio.sleep(down_seconds)
        await self.start()
        self.restarts += 1


class WorkerPool:
    """``WorkerPool(env, size, tmp)``: ``size`` worker processes on the ``STATEKEEPER_*`` of
    ``env``, forked by ``bench/chaos/zygote.py`` (``worker.main()``; the import paid once).
    ``kill_one(rng)`` SIGKILLs a random live one and forks a replacement at once; ``tend()``
    replaces any that exited on their own (e.g. refused to start while the Temporal server
    was down), not counted as kills."""

    def __init__(self, env: dict[str, str], size: int, tmp: Path) -> None:
        self.env, self.size, self.tmp = env, size, tmp
        self.pids: list[int] = []
        self.kills = 0
        self.exits = 0
        self.kill_times: list[float] = []  # time.monotonic() of each kill (the largest gap is reported)
        self._spawned = 0
        self._zygote: Optional[subprocess.Popen] = None
        self._lock = threading.Lock()  # tend and kill_one must not both replace one process

    def _spawn(self) -> int:
        self._spawned += 1
        assert self._zygote is not None and self._zygote.stdin is not None and self._zygote.stdout is not None
        self._zygote.stdin.write(f"{self.tmp / f'worker-{self._spawned}.log'}\n")
        self._zygote.stdin.flush()
        return int(self._zygote.stdout.readline())

    def start(self) -> None:
        """Start the zygote (blocks while it imports) and fork ``size`` workers."""
        env = {k: v for k, v in os.environ.items() if "ANTHROPIC" not in k}
        self._zygote = subprocess.Popen([sys.executable, str(ROOT / "bench" / "chaos" / "zygote.py")], cwd=ROOT,
                                        env={**env, **self.env}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=(self.tmp / "zygote.log").open("ab"), text=True)
        if self._zygote.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the worker zygote did not start; see {self.tmp / 'zygote.log'}")
        with self._lock:
            self.pids = [self._spawn() for _ in range(self.size)]

    def tend(self) -> None:
        with self._lock:
            for i, pid in enumerate(self.pids):
                if not alive(pid):
                    self.exits += 1
                    self.pids[i] = self._spawn()

    def kill_one(self, rng: random.Random) -> None:
        self.tend()
        with self._lock:
            if not self.pids:
                return
            i = rng.randrange(len(self.pids))
            _kill(self.pids[i])
            self.kills += 1
            self.kill_times.append(time.monotonic())
            self.pids[i] = self._spawn()

    def stop(self) -> None:
        with self._lock:
            for pid in self.pids:
                _kill(pid)
            self.pids = []
            if self._zygote is not None and self._zygote.poll() is None:
                self._zygote.kill()
                self._zygote.wait(10)


def alive(pid: int) -> bool:
    """True while process ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _kill(pid: int) -> None:
    """SIGKILL ``pid`` (a worker this pool forked) and wait until it is gone."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    for _ in range(200):
        if not alive(pid):
            return
        time.sleep(0.01)


def worker_env(address: str, urls: dict[str, str], services: dict[str, str], tmp: Path, queue: str) -> dict[str, str]:
    """The ``STATEKEEPER_*`` environment of the run's workers: the system of record, journal and
    plans on the ``sor`` database, the three services, the offline model."""
    return {"STATEKEEPER_TEMPORAL_ADDRESS": address, "STATEKEEPER_TASK_QUEUE": queue,
            "STATEKEEPER_DATABASE_URL": urls["sor"], "STATEKEEPER_JOURNAL_URL": urls["sor"],
            "STATEKEEPER_DATA_DIR": str(tmp), "STATEKEEPER_CODEC_KEYS": os.environ["STATEKEEPER_CODEC_KEYS"],
            "STATEKEEPER_PAYMENTS_URL": services["payments"], "STATEKEEPER_EMAIL_URL": services["email"],
            "STATEKEEPER_TICKETING_URL": services["ticketing"], "ANTHROPIC_API_KEY": "",
            "STATEKEEPER_ANTHROPIC_API_KEY": ""}


def run_id() -> str:
    """A fresh id for a run's databases and task queue."""
    return uuid.uuid4().hex[:8]
