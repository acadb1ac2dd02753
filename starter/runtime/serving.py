"""Serving an ASGI app with uvicorn: beside other work in this event loop (the API and the
codec server of ``statekeeper dev``: ``serving``), or as the whole command (``statekeeper
api``, ``statekeeper codec-server``: ``serve_until_stopped``). Either way a server that cannot
listen raises ``NotListening`` saying why, instead of uvicorn's ``sys.exit``."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import errno
import logging
from typing import Any, AsyncIterator, Callable, Optional

import uvicorn

from starter.runtime.stop_signals import run_until_stopped

_starting: contextvars.ContextVar[Optional[tuple[uvicorn.Server, list[OSError]]]] = contextvars.ContextVar(
    "starting", default=None)
"""The server starting in this context and where ``_KeepBindError`` puts its bind error (each
server starts in its own task, so two starting at once keep their own)."""


class NotListening(OSError):
    """A server that could not listen on ``host:port``: ``reason`` says why (e.g. "the port is
    taken"). ``str()`` is what ``statekeeper dev`` prints; ``refusal`` what a command that
    serves nothing else prints."""

    def __init__(self, what: str, host: str, port: int, reason: str) -> None:
        super().__init__(f"the {what} could not listen on {host}:{port}: {reason}")
        self.what, self.host, self.port, self.reason = what, host, port, reason

    @property
    def refusal(self) -> str:
        """One line for the user: ``cannot serve the <what> on <host>:<port>: <reason>``."""
        return f"cannot serve the {self.what} on {self.host}:{self.port}: {self.reason}"


class _KeepBindError(logging.Filter):
    # uvicorn logs the OSError of a failed bind (the record's msg is the exception itself) and
    # then calls sys.exit: the log record is the only place that says why. It is kept for the
    # server's NotListening, which says it in words, and not logged twice.
    def filter(self, record: logging.LogRecord) -> bool:
        starting = _starting.get()
        # only while it starts: its connections' tasks inherit this context, and log as they will
        if starting is not None and not starting[0].started and isinstance(record.msg, OSError):
            starting[1].append(record.msg)
            return False
        return True


_KEEP_BIND_ERROR = _KeepBindError()


def _reason(error: Optional[OSError]) -> str:
    if error is None:  # uvicorn ended its startup before binding (its log says why)
        return "its startup failed"
    if error.errno == errno.EADDRINUSE:
        return "the port is taken"
    if error.errno == errno.EADDRNOTAVAIL:
        return "the address is not one of this host's"
    if error.errno == errno.EACCES:
        return "permission denied (ports below 1024 need privileges)"
    return (error.strerror or str(error)).lower()


async def _serve(server: uvicorn.Server, what: str) -> None:
    kept: list[OSError] = []
    _starting.set((server, kept))  # this task's own context: a concurrent server's error is not ours
    logging.getLogger("uvicorn.error").addFilter(_KEEP_BIND_ERROR)  # once: addFilter ignores a repeat
    try:
        await server.serve()
    except SystemExit:
        # uvicorn ends a failed startup (a taken port) with sys.exit; raised out of a task,
        # asyncio re-raises SystemExit through the event loop, and it ended the whole command
        # (`statekeeper dev` exited 3 when its codec server's port was taken; `statekeeper api`
        # exited 3 with uvicorn's log line alone)
        config = server.config
        raise NotListening(what, config.host, config.port, _reason(kept[0] if kept else None)) from None


def _prepare(server: uvicorn.Server, listening: Callable[[], None] = lambda: None) -> None:
    """Turn off uvicorn's own signal capture, and call ``listening`` from its startup right
    after it binds.

    The command's own Ctrl-C and SIGTERM handling stops the server (``run_until_stopped``):
    uvicorn's capture, per server, re-raised each signal it caught once its server ended, and a
    SIGTERM then a SIGINT to `statekeeper dev` printed both servers' tracebacks. ``listening``
    runs before the event loop runs anything else, so not even a first request is answered
    before it: polled for instead, a quick client could be served and stop the command first."""
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
    startup = server.startup

    async def announced_startup(sockets: Any = None) -> None:
        await startup(sockets=sockets)
        if server.started:
            listening()

    server.startup = announced_startup  # type: ignore[method-assign]


@contextlib.asynccontextmanager
async def serving(server: uvicorn.Server, what: str, host: str, port: int) -> AsyncIterator[str]:
    """Run ``server`` while the block runs; yields its base URL ``http://host:port``. Raises
    ``NotListening`` (an ``OSError``) naming ``what`` when it cannot listen (e.g. the port is taken)."""
    _prepare(server)
    task = asyncio.create_task(_serve(server, what))
    try:
        while not server.started:
            if task.done():
                task.result()  # NotListening
                raise NotListening(what, host, port, "its startup ended")  # it returned without listening
            await asyncio.sleep(0.05)
        yield f"http://{host}:{port}"
    finally:
        # a stop while it starts too: left running, asyncio.run cancelled it at exit, and its
        # lifespan printed a CancelledError traceback
        server.should_exit = True
        await task


def serve_until_stopped(server: uvicorn.Server, what: str, listening: Callable[[], None] = lambda: None) -> None:
    """Run ``server`` as the whole command until Ctrl-C or SIGTERM; then, once it has shut
    down gracefully, raise ``KeyboardInterrupt`` (for the command's ``interruptible``: "stopped.").
    A second signal during the shutdown is ignored (``run_until_stopped``). ``listening`` is
    called once it listens (the command's address line: printed before, a taken port showed that
    line, then the refusal). Raises ``NotListening`` naming ``what`` when it cannot listen."""
    # not uvicorn.run: it turns a failed startup into sys.exit(3) and swallows the interrupt
    async def main() -> None:
        _prepare(server, listening)
        task = asyncio.create_task(_serve(server, what))
        try:
            await asyncio.shield(task)  # a stop cancels this wait, not the server: it shuts down below
        finally:
            server.should_exit = True
            await task  # NotListening

    run_until_stopped(main)
