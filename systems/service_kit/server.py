"""Running a service as a real HTTP server in a background thread (tests, ``statekeeper dev``)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Optional

import uvicorn


def free_port(host: str = "127.0.0.1") -> int:
    """An unused TCP port on ``host``."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class ServiceThread:
    """``ServiceThread(app, port=None)``: uvicorn serving ``app`` on 127.0.0.1 in a daemon
    thread with its own event loop; ``start()`` returns once it listens, ``stop()`` ends it."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: Optional[int] = None) -> None:
        self.host, self.port = host, port or free_port(host)
        # log_config=None: uvicorn configures no handlers of its own, so its records (a failed
        # request's traceback quotes SQL parameters) reach the process's root logger and its
        # redaction; no log_level either: it would reset the levels of the other servers in the process
        self.server = uvicorn.Server(uvicorn.Config(app, host=self.host, port=self.port, log_level=None,
                                                   log_config=None, access_log=False, lifespan="off"))
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.server.run()
        except SystemExit:  # uvicorn exits when it cannot listen; start() reports it
            pass

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 10.0) -> "ServiceThread":
        """Start serving; raises ``OSError`` if it does not listen within ``timeout`` seconds."""
        self._thread.start()
        end = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > end:
                raise OSError(f"the service could not listen on {self.host}:{self.port}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=10)
