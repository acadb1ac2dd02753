"""A free TCP port on the loopback interface, for a server a test starts."""

from __future__ import annotations

import socket

_given: set[int] = set()
"""The ports this process handed out: the OS may offer a port again as soon as its probe closes,
and a test that asks for several ports in a row (a dev stack: Temporal, its UI, the API, the codec
server) must get different ones, or one server answers another's clients."""


def free_port() -> int:
    """A port nothing listens on now and that this process never handed out before (the OS
    picks it; another process may take it before the test binds it, so a test that must not
    race binds and passes the socket instead)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _given:
            _given.add(port)
            return port
