"""One-line refusals for what goes wrong around a command's work on a bad day: an invalid
setting, a data directory that cannot be used, statekeeper's own database (the journal's)
damaged, locked, unreachable or migrated by a newer version, an output file that cannot be
written.

Why here: unhandled, each of these reaches the user as a Python traceback ending in an exception class
name (``ValidationError``, ``FileExistsError``, ``DatabaseError``, ``CommandError``,
``FileNotFoundError``), and an unwritable output file of ``backtest --json`` would be found only
after the whole run, losing its report. A command says what is wrong and what to do in
one line on stderr, exits non-zero (2: the caller's input or settings; 1: the environment),
and has changed nothing. The database's own text is never shown: it may hold its URL (a
password) or SQL.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Iterator, Optional

import typer
from pydantic import ValidationError
from pydantic_settings import SettingsError
from rich.markup import escape

from settings import Settings
from starter.dev import state as devstate
from starter.cli.support import errors
from starter.runtime.problems import JOURNAL, settings_problems, storage_problem
from workflows.domain.user_text import id_problem

_SETTINGS_FIELD = re.compile(r'error parsing value for field "([a-z_]{1,60})"')
_JSON_EXAMPLES = {"STATEKEEPER_STORE_TENANTS": '{"acme-eu": "acme"}'}


def fail(message: str, code: int) -> typer.Exit:
    """Print ``statekeeper: <message>`` on stderr (one line, whatever the width) and return
    the ``typer.Exit`` to raise."""
    errors.print(f"[red]statekeeper: {escape(message)}[/]", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def given_id(value: str, what: str = "conversation id") -> str:
    """``value`` when it can name something: refused (status 2, before any connection) when it
    is blank (an unset shell variable: ``state ""`` answered 'conversation  does not exist'
    after starting a server) or holds a control character."""
    if not value.strip():
        raise fail(f"give a {what} (it is empty)", 2)
    problem = id_problem(value, f"the {what}")
    if problem is not None:
        raise fail(problem, 2)
    return value


def command_settings() -> Settings:
    """The settings of a command: the environment's, completed from a detached dev server
    running at the same address (``starter.dev.state.adopt``), so a command started in another
    directory uses its system of record instead of seeding a new one. An invalid setting ends
    the command with one line naming each setting and status 2, not a validation traceback."""
    try:
        return devstate.adopt(Settings())
    except ValidationError as err:
        raise fail(f"invalid setting: {settings_problems(err)}", 2) from None
    except SettingsError as err:  # a JSON setting (STATEKEEPER_STORE_TENANTS) that does not parse
        field = _SETTINGS_FIELD.search(str(err))
        name = f"STATEKEEPER_{field.group(1).upper()}" if field else "a STATEKEEPER_ setting"
        example = _JSON_EXAMPLES.get(name)
        raise fail(f"invalid setting: {name}: not valid JSON" + (f" (e.g. {example})" if example else ""), 2) from None


@contextlib.contextmanager
def storage_refusals(settings: Settings) -> Iterator[None]:
    """Run a command's body on statekeeper's own database: first the data directory must be
    usable (when the journal lives in it); then any storage failure of the body is one line
    (``storage_problem``) and status 1."""
    what = f"{JOURNAL} (STATEKEEPER_JOURNAL_URL)"
    if not settings.journal_url:
        what = f"{JOURNAL} {settings.data_dir / 'journal.sqlite'}"
        try:
            settings.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            why = "it is not a directory" if settings.data_dir.exists() else err.strerror
            raise fail(f"the data directory {settings.data_dir} cannot be used ({why}): set "
                       "STATEKEEPER_DATA_DIR to a directory statekeeper may write", 1) from None
    try:
        yield
    except Exception as err:  # noqa: BLE001 - only storage failures are translated; the rest re-raised
        problem = storage_problem(err, what)
        if problem is None:
            raise
        raise fail(problem, 1) from None


def writable_output(path: Optional[Path]) -> None:
    """Refuse (status 2) an output file the command could not write, before any work: a
    directory, a missing directory, no permission. ``-`` (standard output) and None pass."""
    if path is None or str(path) == "-":
        return
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        reason = "it is a directory"
    elif not parent.is_dir():
        reason = f"its directory {parent} does not exist"
    elif not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        reason = "permission denied"
    else:
        return
    raise fail(f"{path} cannot be written: {reason}; nothing was done", 2)


def write_output(path: Path, text: str) -> None:
    """Write a report to ``path``; a failure now (e.g. a full disk) is one line and status 1."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as err:
        raise fail(f"{path} cannot be written: {err.strerror}", 1) from None
