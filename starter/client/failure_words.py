"""Failures worded for people: the kind of an exception as a short phrase, never its class
name. Operators read these in API refusals (a resolution's 409) and CLI reports
(``replay-check``); the class name belongs in the log, which the caller writes.
"""

from __future__ import annotations

import asyncio

import httpx
from sqlalchemy.exc import SQLAlchemyError
from temporalio.service import RPCError


def failure_kind(err: BaseException) -> str:
    """A phrase for what kind of failure ``err`` is: "it timed out", "a connection failed",
    "Temporal did not answer", "the database failed", "the data did not decode", "the
    operating system refused" or, for anything else, "an unexpected error". Never raises."""
    if isinstance(err, (TimeoutError, asyncio.TimeoutError, httpx.TimeoutException)):
        return "it timed out"
    if isinstance(err, (ConnectionError, httpx.TransportError)):
        return "a connection failed"
    if isinstance(err, RPCError):
        return "Temporal did not answer"
    if isinstance(err, SQLAlchemyError):
        return "the database failed"
    if isinstance(err, (ValueError, UnicodeError, KeyError, TypeError)):  # pydantic's ValidationError too
        return "the data did not decode"
    if isinstance(err, OSError):
        return "the operating system refused"
    return "an unexpected error"
