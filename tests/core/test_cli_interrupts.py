"""How a command ends on Ctrl-C or SIGTERM (``starter.cli.support``): SIGTERM inside
``asyncio.run`` cancels the main task as Ctrl-C does, so ``async with`` blocks unwind (a
``KeyboardInterrupt`` raised at a random point of the event loop would leave a chat waiting for
a reply hung, with its embedded server running); an interrupted command stops where it is, with
its status, instead of running on into results that do not exist (``taubench`` would crash with
an ``UnboundLocalError`` after "stopped.")."""

from __future__ import annotations

import asyncio
import gc
import os
import signal

import pytest
import typer

from starter.cli.support import interruptible, as_ctrl_c


def test_sigterm_inside_asyncio_run_cancels_the_main_task_and_its_cleanups_run():
    seen: list[str] = []

    async def command() -> None:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        finally:
            seen.append("cleaned up")

    # as in a command's process: Python's own SIGINT handler (an earlier test or the test runner
    # may have set another), which asyncio.run then replaces by its own for the run
    before = signal.signal(signal.SIGTERM, as_ctrl_c), signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            asyncio.run(command())
    finally:
        signal.signal(signal.SIGTERM, before[0])
        signal.signal(signal.SIGINT, before[1])
    assert seen == ["cancelled", "cleaned up"]


def test_sigterm_where_sigint_is_ignored_still_interrupts():
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a background job of a shell script
    try:
        with pytest.raises(KeyboardInterrupt):
            as_ctrl_c(signal.SIGTERM, None)
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize("status", [0, 130])
def test_an_interrupted_command_stops_with_its_status_and_runs_nothing_after(status, capsys):
    ran_on = []
    with pytest.raises(typer.Exit) as ended:
        with interruptible(status):
            raise KeyboardInterrupt
        ran_on.append("the report")  # what taubench did after "stopped."
    assert ended.value.exit_code == status and ran_on == []
    assert "stopped." in capsys.readouterr().out


@pytest.mark.parametrize("settled", [True, False])
def test_a_cancelled_bounded_call_leaves_no_unread_error(settled):
    """``starter.client.core.within``: the SDK answers the cancellation of an update RPC with its own
    error, which ``asyncio.wait_for`` would leave unread in its task (asyncio then logs "Task
    exception was never retrieved" after a chat's "stopped."). ``settled`` False: the call takes a moment
    to end after it is cancelled."""
    from starter.client.core import within

    unread: list[dict] = []

    async def rpc() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            if not settled:
                await asyncio.sleep(0.01)
            raise RuntimeError("timeout or cancellation waiting for update") from None

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, context: unread.append(context))
        waiting = asyncio.ensure_future(within(rpc(), 30))
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):  # the caller's cancellation goes on, not the call's error
            await waiting
        await asyncio.sleep(0.05)
        gc.collect()  # an unread task's error is reported when it is collected

    asyncio.run(main())
    assert [c["message"] for c in unread] == []
