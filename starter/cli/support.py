"""How a ``statekeeper`` command talks and ends: its consoles (``errors`` on stderr), the chat
prompt, Ctrl-C and SIGTERM (``interruptible``, ``as_ctrl_c``). Used by ``starter.cli.app`` and
the command modules beside it."""

from __future__ import annotations

import asyncio
import signal
import threading
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from starter.dev.server import DevServerError
from starter.runtime.preflight import StartupRefused
from starter.runtime.serving import NotListening

console = Console()
errors = Console(stderr=True)
"""Where a command that fails says why: stderr, so a failed ``state ID > state.json`` shows it
and leaves no message in the file."""


def agent_line(text: str) -> str:
    """The chat's line for a reply, its text escaped: rich took an exchange's detail
    "-> 2880340443 [color white, sensor type optical] (137.22)" for markup and showed
    "-> 2880340443  (137.22)", the very options the user was asked to confirm."""
    return f"[bold green]agent>[/] {escape(text)}"


async def typed_line(prompt: str) -> str:
    """A line the user typed after ``prompt`` (raises ``EOFError`` at the end of input). Read
    on a daemon thread, not ``asyncio.to_thread``: at Ctrl-C, ``asyncio.run`` would wait for
    the executor's thread still blocked in ``input`` until the user pressed Enter."""
    loop = asyncio.get_running_loop()
    typed: asyncio.Future[str] = loop.create_future()

    def settle(text: Optional[str], err: Optional[BaseException]) -> None:
        if typed.done():  # a Ctrl-C cancelled the wait already
            return
        if err is not None:
            typed.set_exception(err)
        else:
            typed.set_result(text or "")

    def read() -> None:
        try:
            text = console.input(prompt)
        except BaseException as err:  # noqa: BLE001 - EOF (and the rest) belongs to the waiter
            loop.call_soon_threadsafe(settle, None, err)
        else:
            loop.call_soon_threadsafe(settle, text, None)

    threading.Thread(target=read, name="chat-input", daemon=True).start()
    return await typed


class interruptible:
    """Ctrl-C (or SIGTERM, ``main``) ends a command quietly: "stopped." and ``stopped_status``
    (0 for what runs until stopped: dev, api, chat; 130, the shell's status for an interrupt,
    for work cut short), and nothing after the block runs (it would use results that do not
    exist). A refused startup (``StartupRefused``, ``DevServerError``) prints its message, not a
    traceback, and exits with status 2; a server that cannot listen (``NotListening``: the port
    is taken), status 1."""

    def __init__(self, stopped_status: int = 0) -> None:
        self.stopped_status = stopped_status

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is KeyboardInterrupt:
            console.print("\nstopped.")
            raise typer.Exit(self.stopped_status)
        if exc_type is not None and issubclass(exc_type, (StartupRefused, DevServerError)):
            # soft_wrap: one line in a container's log too (rich wrapped a piped stderr at 80 columns)
            errors.print(f"[red]statekeeper: {escape(str(exc))}[/]", highlight=False, soft_wrap=True)
            raise typer.Exit(2)
        if exc_type is not None and issubclass(exc_type, NotListening):
            # soft_wrap: one line in a log too (a piped stderr is 80 columns wide to rich)
            errors.print(f"[red]statekeeper: {escape(exc.refusal)}[/]", highlight=False, soft_wrap=True)
            raise typer.Exit(1)
        return False


def as_ctrl_c(signum: int, frame) -> None:
    """SIGTERM handled as SIGINT is at this moment: inside ``asyncio.run`` its handler cancels
    the main task, so the command unwinds through its ``async with`` blocks (a
    ``KeyboardInterrupt`` raised at a random point of the event loop left a chat waiting for a
    reply hung); elsewhere, or where SIGINT is ignored (a background job of a script), a
    ``KeyboardInterrupt``."""
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler) and handler is not signal.default_int_handler:
        handler(signal.SIGINT, frame)
    else:
        raise KeyboardInterrupt


def one_line_summaries(app: typer.Typer) -> None:
    """Give each command of ``app`` (and of its sub-apps) without a short help the first
    paragraph of its docstring on one line: in the command list of ``statekeeper --help``
    typer's rich mode keeps a docstring's line breaks, so "validate the answers" ended one
    row and "with the current policy" began the next, mid-sentence."""
    import inspect

    for info in app.registered_commands:
        doc = inspect.getdoc(info.callback) if info.callback else None
        if info.short_help is None and info.help is None and doc:
            info.short_help = " ".join(doc.split("\n\n")[0].split())
    for group in app.registered_groups:
        if group.typer_instance is not None:
            one_line_summaries(group.typer_instance)


def ui_url(settings) -> str:
    """The Temporal Web UI's workflow list for ``settings`` (``settings.Settings``): port and namespace."""
    return f"http://127.0.0.1:{settings.ui_port}/namespaces/{settings.temporal_namespace}/workflows"
