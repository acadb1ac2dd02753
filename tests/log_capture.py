"""Capturing what the process's root logger writes, as ``starter.runtime.logs.configure_logging``
sets it up, with the loggers' state restored afterwards (other tests keep theirs)."""

from __future__ import annotations

import contextlib
import io
import logging
from typing import Iterator

from starter.runtime.logs import configure_logging


@contextlib.contextmanager
def root_log(level: int | str = logging.INFO, *reset: str) -> Iterator[io.StringIO]:
    """The root logger starts with no handler and logs at ``level`` into the yielded stream
    (``configure_logging``); the loggers named in ``reset`` start unconfigured (no handlers,
    propagating, level NOTSET), as in a process where nothing set them up. Handlers, levels
    and propagation of all of them are restored on exit."""
    loggers = [logging.getLogger(), *(logging.getLogger(name) for name in reset)]
    saved = [(lg, lg.handlers[:], lg.level, lg.propagate) for lg in loggers]
    for lg in loggers:
        lg.handlers, lg.propagate = [], True
    for lg in loggers[1:]:
        lg.setLevel(logging.NOTSET)
    stream = io.StringIO()
    try:
        configure_logging(level, stream=stream)
        yield stream
    finally:
        for lg, handlers, lvl, propagate in saved:
            lg.handlers, lg.propagate = handlers, propagate
            lg.setLevel(lvl)
