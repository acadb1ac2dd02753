"""The times the simulated services answer with: always timezone-aware UTC.

A record's ``created_at`` is written aware, but SQLite gives it back naive: a first answer
said ``...Z`` and the same record read again (a replay, a search) had no zone, so a caller
comparing them saw two different times.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated

from pydantic import AfterValidator


def _utc(value: datetime) -> datetime:
    # a naive time from the database was stored as UTC (the services write only UTC times)
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


UtcTime = Annotated[datetime, AfterValidator(_utc)]
"""A ``datetime`` field that is UTC-aware however it was read."""
