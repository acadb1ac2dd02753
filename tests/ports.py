"""A free TCP port on the loopback interface, for a server a test starts."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on now (the OS picks it; another process may take it before the
    test binds it, so a test that must not race binds and passes the socket instead)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
