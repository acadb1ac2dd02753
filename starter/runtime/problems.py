"""What stops a process at startup, in one line for people: an invalid setting, statekeeper's
own database (the journal's) damaged, locked, unreachable or migrated by a newer version.

Shared by the command line (``starter.cli.refusals``), the HTTP API's startup and the worker.
The database's own text is never shown: it may hold its URL (a password) or SQL.
"""

from __future__ import annotations

import re
from typing import Optional

from pydantic import ValidationError

JOURNAL = "the journal database"
_SQLITE_KINDS = {
    # worded for either database: the worker reports its system of record with this table too
    "SQLITE_NOTADB": "is not a database (or is damaged): point its URL setting (STATEKEEPER_JOURNAL_URL, "
                     "STATEKEEPER_DATABASE_URL) or STATEKEEPER_DATA_DIR at statekeeper's own database",
    "SQLITE_CORRUPT": "is damaged: restore it from a backup",
    "SQLITE_CANTOPEN": "cannot be opened: its directory is missing or not writable",
    "SQLITE_BUSY": "is locked by another process: try again in a moment",
    "SQLITE_LOCKED": "is locked by another process: try again in a moment",
    "SQLITE_READONLY": "is read-only: statekeeper needs to write it",
    "SQLITE_FULL": "cannot be written: the disk is full",
    "SQLITE_IOERR": "cannot be read or written: a disk error",
    "SQLITE_PERM": "cannot be opened: permission denied",
}
_UNKNOWN_REVISION = re.compile(r"Can't locate revision identified by '([^']{1,40})'")


def settings_problems(err: ValidationError) -> str:
    """``STATEKEEPER_<NAME>: <why>`` of each invalid setting in ``err``, joined by ``; ``."""
    return "; ".join(_problem(e) for e in err.errors())


def _problem(error: dict) -> str:
    """``STATEKEEPER_<NAME>: <why>`` of one validation error: the variable is the field's,
    and an entry of a JSON setting is named inside it (``STATEKEEPER_STORE_TENANTS`` entry
    ``acme-eu``, not a variable ``STATEKEEPER_STORE_TENANTS_ACME-EU`` that does not exist)."""
    name, *inside = map(str, error["loc"])
    where = f" (entry {'.'.join(inside)})" if inside else ""
    return f"STATEKEEPER_{name.upper()}{where}: {error['msg'].removeprefix('Value error, ')}"


def storage_problem(err: BaseException, what: str = JOURNAL) -> Optional[str]:
    """What went wrong with ``what``, for people, from the kind of ``err`` alone (None: not
    a storage failure): SQLite's error name, an unknown Alembic revision (a newer
    statekeeper migrated it), a connection refused, a file system error."""
    from alembic.util.exc import CommandError
    from sqlalchemy.exc import OperationalError, SQLAlchemyError

    if isinstance(err, CommandError):
        unknown = _UNKNOWN_REVISION.search(str(err))
        if unknown:
            return (f"{what} is at schema revision {unknown.group(1)}, which a newer statekeeper made: run that "
                    "version, or point STATEKEEPER_JOURNAL_URL at another database; nothing was changed")
        return f"{what} could not be migrated; nothing was changed"
    if isinstance(err, SQLAlchemyError):
        kind = getattr(getattr(err, "orig", None), "sqlite_errorname", None) or ""
        for name, says in _SQLITE_KINDS.items():
            if kind.startswith(name):
                return f"{what} {says}"
        if isinstance(err, OperationalError):
            return f"{what} cannot be reached or refused the connection: check the URL, the server and its credentials"
        return f"{what} failed; nothing more was done"
    if isinstance(err, OSError) and not isinstance(err, BrokenPipeError):  # a reader gone: exit_now's
        where = f"{err.filename}: " if err.filename else ""
        return f"{where}{err.strerror or 'the file system refused'}"
    return None
