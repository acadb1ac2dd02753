"""A real HTTP receiver of webhooks for tests (``http.server`` in a thread, on a loopback port):
it records every request (path, headers, body) and answers by path:

- ``/ok``: 200; ``/500``: 500; ``/301``: 301 to ``/ok`` (a follower would hit ``/ok``);
- ``/slow``: answers 200 after 30 s; ``/huge``: 200 with a 50 MB body;
- ``/flip``: 200 to the first request, 500 to every later one;
- ``/switch``: 503 while ``down`` is set, else 200.
"""

from __future__ import annotations

import contextlib
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator, NamedTuple

SLOW_SECONDS = 30
HUGE_BYTES = 50 * 1024 * 1024


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:  # noqa: ANN001
        pass  # a sender that hangs up without reading (a 50 MB body, keep-alive) is expected here


class Received(NamedTuple):
    """One request as it arrived."""

    path: str
    headers: dict[str, str]
    body: bytes
    at: float
    """``time.time()`` when its body was read."""


class Receiver:
    """The receiver's state: what it got, and switches the tests flip."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.down = threading.Event()
        self._lock = threading.Lock()
        self.url = ""

    def got(self, path: str) -> list[Received]:
        """The requests that arrived at ``path``, in order."""
        with self._lock:
            return [r for r in self.received if r.path == path]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # noqa: ANN002 (quiet)
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with receiver._lock:  # noqa: SLF001
                    earlier = sum(1 for r in receiver.received if r.path == self.path)
                    receiver.received.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()},
                                                      body, time.time()))
                if self.path == "/500" or (self.path == "/flip" and earlier) or (
                        self.path == "/switch" and receiver.down.is_set()):
                    return self._answer(500 if self.path != "/switch" else 503)
                if self.path == "/301":
                    return self._answer(301, location=f"{receiver.url}/ok")
                if self.path == "/slow":
                    time.sleep(SLOW_SECONDS)
                if self.path == "/huge":
                    return self._huge()
                self._answer(200)

            def _answer(self, status: int, location: str = "") -> None:
                self.send_response(status)
                if location:
                    self.send_header("location", location)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def _huge(self) -> None:
                self.send_response(200)
                self.send_header("content-length", str(HUGE_BYTES))
                self.end_headers()
                chunk = b"x" * (1024 * 1024)
                with contextlib.suppress(OSError):  # the sender hangs up without reading it
                    for _ in range(HUGE_BYTES // len(chunk)):
                        self.wfile.write(chunk)

        return Handler


@contextlib.contextmanager
def receiving(port: int = 0) -> Iterator[Receiver]:
    """A ``Receiver`` listening on 127.0.0.1 (``port`` 0: a free one) while the block runs;
    ``receiver.url`` is its base URL."""
    receiver = Receiver()
    server = _Server(("127.0.0.1", port), receiver._handler())  # noqa: SLF001
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
